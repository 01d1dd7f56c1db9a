"""Summaries of repeated measurements: median and spread, never a lone sample.

Paired comparisons: runs measured in interleaved rounds are compared round by round (the ratio of
their throughputs in the same round), and the median ratio gets a distribution-free confidence
interval from order statistics (the sign-test interval): no assumption about the shape of the noise.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass


def summary(values: list[float]) -> dict[str, object]:
    """{median, min, max, values}; the median of an empty list is None."""
    if not values:
        return {"median": None, "min": None, "max": None, "values": []}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }


def _below(k: int, n: int) -> float:
    """P(X < k) for X ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k)) / 2**n


@dataclass(frozen=True)
class Interval:
    median: float
    low: float
    high: float
    coverage: float  # the interval's exact coverage of the true median (0 when n < 2)
    n: int


def median_interval(values: list[float], level: float = 0.95) -> Interval:
    """The order-statistic interval [x(k), x(n+1-k)] for the median with coverage ≥ ``level``.

    With too few values for that level the widest interval (min, max) is returned with its own,
    lower coverage; the caller decides whether that is enough.
    """
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        raise ValueError("median_interval needs at least one value")
    k = 1
    while k + 1 <= n // 2 and 1 - 2 * _below(k + 1, n) >= level:
        k += 1
    coverage = 1 - 2 * _below(k, n) if n >= 2 else 0.0
    return Interval(statistics.median(xs), xs[k - 1], xs[n - k], coverage, n)


def paired_ratios(a: list[float], b: list[float]) -> list[float]:
    """a[i] / b[i] for the rounds both runs measured."""
    return [x / y for x, y in zip(a, b, strict=False) if y > 0]
