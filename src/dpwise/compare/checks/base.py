"""The checks' one interface (a CheckContext in, a Finding out, said as a CheckResult), a
Diagnosis of the model, and run comparisons shared by the checks and the verdict."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, Generic, Literal, TypeVar

from dpwise.compare.checks.thresholds import CONFIDENCE, SPEED_MARGIN
from dpwise.diagnosis.buffers import MutatedBuffer
from dpwise.diagnosis.layers import Layer, group
from dpwise.diagnosis.unused import Unused
from dpwise.measure.agreement import Untrained
from dpwise.measure.stats import median_interval, paired_ratios
from dpwise.results.records import CheckResult, CheckStatus, Json, Run, Table


@dataclass(frozen=True)
class Diagnosis:
    """What in the model or set-up can make parallel runs differ from the single process.

    ``batchnorm`` is found by class (its statistics follow each device's share of the batch);
    ``stochastic`` by behaviour where the model probe ran, else by class (Dropout).
    """

    batchnorm: list[Layer]
    stochastic: list[Layer]
    loss_reduction: str
    precision: str = "fp32"  # bf16 / fp16 round differently when the batch is split
    unused: Unused = field(default_factory=Unused)
    ddp_options: dict[str, bool] = field(default_factory=dict)  # what the ddp runs passed to DDP
    probe_skipped: str | None = None  # why random layers were looked up by class name only
    buffers: list[MutatedBuffer] = field(default_factory=list)  # changed by the forward
    untrained: Untrained | None = None  # trainable parameters no run changed (None: not known)
    param_dtypes: list[str] = field(default_factory=lambda: ["fp32"])  # bf16, fp32 …

    @property
    def read_buffers(self) -> list[MutatedBuffer]:
        """Buffers the forward updates from its rows and the loss reads, BatchNorm's aside (their
        own cause): each process's follow its own rows."""
        bn = {layer.name for layer in self.batchnorm}
        return [b for b in self.buffers if b.used and b.module not in bn]

    @property
    def known_cause(self) -> str | None:
        """A short name of every known cause of divergence, or None."""
        causes = []
        if self.batchnorm:
            causes.append(f"BatchNorm ({group(self.batchnorm)})")
        if self.stochastic:
            causes.append(f"random layers ({group(self.stochastic)})")
        if self.loss_reduction != "mean":
            causes.append(f"a {self.loss_reduction}-reduced loss")
        if self.read_buffers:
            names = ", ".join(b.name for b in self.read_buffers[:3])
            causes.append(
                f"buffers updated from each process's rows and read by the loss ({names})"
            )
        return " and ".join(causes) or None


@dataclass(frozen=True, kw_only=True)
class CheckContext:
    """Everything a check may read: the measured runs (single first) and the set-up."""

    runs: tuple[Run, ...]
    tolerance: float  # convergence: the largest parameter difference from single that passes
    diagnosis: Diagnosis  # what in the model can make the runs differ
    device_type: str  # "cpu" or "cuda"
    repeats: int  # timed repeats per run (interleaved rounds)
    cpu_cores: int


@dataclass(frozen=True, kw_only=True)
class Finding:
    """What a check found, as data: its status, the figures results.json keeps, its table and
    its plot. Each check's finding adds its cause and the figures its sentences need."""

    status: CheckStatus
    figures: Json
    table: Table
    plot: str | None


F = TypeVar("F", bound=Finding)


@dataclass(frozen=True)
class Said:
    """A finding in words: the check's one-line summary and its explanation."""

    summary: str
    explanation: str


@dataclass(frozen=True)
class Check(Generic[F]):
    """One validation check: its name (the CheckResult's), how it finds (compute, no prose) and
    how its finding is said (the checks' text module)."""

    name: str
    find: Callable[[CheckContext], F]
    say: Callable[[F], Said]

    def __call__(self, ctx: CheckContext) -> CheckResult:
        found = self.find(ctx)
        said = self.say(found)
        return CheckResult(
            name=self.name,
            status=found.status,
            summary=said.summary,
            explanation=said.explanation,
            figures=found.figures,
            table=found.table,
            plot=found.plot,
        )


def diverged(run: Run) -> bool:
    """The run's loss went NaN or infinite (recorded by its loop, or seen in its losses)."""
    if run.diverged:
        return True
    return any(v is None or not math.isfinite(v) for v in run.losses)


def params_agree(run: Run, tolerance: float) -> bool:
    """Every parameter of the run within its dtype's tolerance of single's (compare.agreement);
    a results.json written before the parameters were told from buffers: the largest
    difference of both within ``tolerance``."""
    detail = (run.diff_vs_single or {}).get("parameters")
    if isinstance(detail, dict) and "beyond_tolerance" in detail:
        return not detail["beyond_tolerance"]
    diff = run.max_param_diff_vs_single
    return diff is not None and diff <= tolerance


def buffers_beyond(run: Run) -> list[str]:
    """The buffers of the run beyond the tolerance of single's (none known in older files)."""
    detail = (run.diff_vs_single or {}).get("buffers")
    return list(detail.get("beyond_tolerance") or []) if isinstance(detail, dict) else []


def peak(run: Run) -> int:
    return run.memory.busiest


def median_rate(run: Run) -> float:
    return run.median_rate


Outcome = Literal["faster", "slower", "same", "inconclusive"]


@dataclass(frozen=True)
class Comparison:
    """a against b, round by round: the median throughput ratio and its confidence interval.

    outcome: "faster" / "slower" when the whole interval lies beyond the margin, "same" when it
    lies within it, "inconclusive" when it straddles the margin or there are too few rounds.
    """

    outcome: Outcome
    ratio: float
    low: float
    high: float
    coverage: float
    rounds: int
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def interval(self) -> str:
        return f"{self.low:.2f}–{self.high:.2f}×"


def _values(run: Run) -> list[float]:
    return list(run.samples_per_s.values or [run.median_rate])


def compare(a: Run, b: Run, margin: float = SPEED_MARGIN) -> Comparison:
    """Pair a's and b's repeats by round and test whether a is faster than b by the margin."""
    return judge(_values(a), _values(b), a.label, b.label, margin)


def judge(
    a: list[float], b: list[float], a_label: str, b_label: str, margin: float = SPEED_MARGIN
) -> Comparison:
    """a's and b's throughputs (or b's and a's times) paired by round: is a faster than b by
    the margin? (compare's speed check, tune's candidates against the default)"""
    ci = median_interval(paired_ratios(a, b), CONFIDENCE)
    base = (ci.median, ci.low, ci.high, ci.coverage, ci.n)
    if ci.coverage < CONFIDENCE:
        why = (
            f"only {ci.n} paired round(s): at least 6 are needed for a {CONFIDENCE:.0%} "
            "interval; raise --repeats"
        )
        return Comparison("inconclusive", *base, why)
    if ci.low >= margin:
        return Comparison("faster", *base)
    if ci.high <= 1 / margin:
        return Comparison("slower", *base)
    if ci.low > 1 / margin and ci.high < margin:
        return Comparison("same", *base)
    why = (
        f"{a_label} / {b_label} = {ci.median:.2f}× at the median, but the "
        f"{CONFIDENCE:.0%} interval over {ci.n} rounds, {ci.low:.2f}–{ci.high:.2f}×, crosses "
        f"the {margin - 1:.0%} margin"
    )
    return Comparison("inconclusive", *base, why)


def clearly_faster(a: Run, b: Run) -> bool:
    """a beats b by the margin with the whole confidence interval of the paired ratio."""
    return compare(a, b).outcome == "faster"
