"""Shared shapes of the checks: a CheckResult out, a Diagnosis of the model in."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dpwise.diagnosis.layers import Layer, group
from dpwise.diagnosis.unused import Unused

Run = dict[str, Any]


@dataclass
class CheckResult:
    name: str
    status: str  # pass | fail | warn | skip
    summary: str
    explanation: str
    figures: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=lambda: {"columns": [], "rows": []})
    plot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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
        return " and ".join(causes) or None


def peak(run: Run) -> int:
    return max((d["peak_bytes"] or 0) for d in run["memory"]["per_device"])


def median_rate(run: Run) -> float:
    return run["samples_per_s"]["median"]


MARGIN = 1.05  # a run must be at least 5 % faster than another to count as faster


def overlaps(a: Run, b: Run) -> bool:
    """True when the two runs' repeat spreads overlap: the difference is within the noise."""
    sa, sb = a["samples_per_s"], b["samples_per_s"]
    return sa["min"] <= sb["max"] and sb["min"] <= sa["max"]


def clearly_faster(a: Run, b: Run) -> bool:
    """a beats b by the margin and their spreads do not overlap."""
    return median_rate(a) >= MARGIN * median_rate(b) and not overlaps(a, b)
