"""Shared shapes of the checks: a CheckResult out, a Diagnosis of the model in."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

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
    """What in the model or set-up can make parallel runs differ from the single process."""

    batchnorm: list[str]
    dropout: list[str]
    loss_reduction: str
    uneven: list[str]  # runs whose global batch does not split evenly


def peak(run: Run) -> int:
    return max((d["peak_bytes"] or 0) for d in run["memory"]["per_device"])


def median_rate(run: Run) -> float:
    return run["samples_per_s"]["median"]
