"""Paired comparisons of interleaved runs: the order-statistic interval and its decisions."""

from dataclasses import replace

import pytest

from compare_fakes import run
from dpwise.compare.checks.base import compare
from dpwise.measure.stats import median_interval, paired_ratios
from dpwise.results.records import Run


def test_median_interval_uses_the_sign_test_order_statistics():
    ci = median_interval([float(v) for v in range(1, 13)])  # 12 values: x(3) and x(10)
    assert (ci.low, ci.high, ci.median) == (3.0, 10.0, 6.5)
    assert ci.coverage == pytest.approx(0.9614, abs=1e-4)


def test_too_few_values_get_the_widest_interval_and_say_its_coverage():
    ci = median_interval([3.0, 1.0, 2.0, 5.0, 4.0])
    assert (ci.low, ci.high) == (1.0, 5.0) and ci.coverage == pytest.approx(0.9375)
    assert median_interval([2.0]).coverage == 0.0


def test_ratios_pair_runs_by_round():
    assert paired_ratios([2.0, 6.0, 9.0], [1.0, 3.0]) == [2.0, 2.0]


def test_a_drift_shared_by_both_runs_cancels_in_the_paired_ratio():
    # the machine slows down 3× over the rounds; b is 10 % faster than a in every round
    speed = [1.0, 0.8, 0.6, 0.5, 0.4, 0.35, 0.33, 0.5, 0.9, 1.0]
    a = with_values(run("single", 1000), [1000 * s for s in speed])
    b = with_values(
        run("ddp-2", 1100), [1100 * s * (1 + 0.01 * (i % 3 - 1)) for i, s in enumerate(speed)]
    )
    result = compare(b, a)
    assert result.outcome == "faster" and result.low > 1.05
    # compared as unpaired spreads the two runs would overlap completely
    assert min(b.samples_per_s.values) < max(a.samples_per_s.values)


def with_values(r: Run, values: list[float]) -> Run:
    return replace(r, samples_per_s=replace(r.samples_per_s, values=tuple(values)))


@pytest.mark.parametrize(
    ("rate", "spread", "outcome"),
    [
        (1500, 0.02, "faster"),
        (600, 0.02, "slower"),
        (1010, 0.01, "same"),
        (1040, 0.1, "inconclusive"),
    ],
)
def test_outcomes_follow_the_whole_interval_against_the_margin(rate, spread, outcome):
    assert (
        compare(run("ddp-2", rate, spread=spread), run("single", 1000, spread=spread)).outcome
        == outcome
    )
