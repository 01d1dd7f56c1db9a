"""What the runs say for and against a recommendation, as data: the verdict weighs it
(verdict.py), the compare text says it (text.py)."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.compare.checks.base import Comparison
from dpwise.compare.checks.contention import Contended
from dpwise.measure.agreement import Untrained
from dpwise.results.records import Json, Run


@dataclass(frozen=True)
class Contention:
    """Figures this CPU cannot produce: other processes slowed the runs unevenly."""

    found: tuple[Contended, ...]
    cores: int


@dataclass(frozen=True)
class Busy:
    """Other processes used much of the machine while the runs measured."""

    load: Json


@dataclass(frozen=True)
class ReferenceDiverged:
    """single's loss, the reference, became non-finite."""


@dataclass(frozen=True)
class Drift:
    """One-process runs (``labels``) differ from single beyond the noise: the machine's speed
    was not steady."""

    labels: tuple[str, ...]


@dataclass(frozen=True)
class Unsure:
    """No run is faster, and the noise cannot rule one out (the comparison says why)."""

    comparison: Comparison


Doubt = Contention | Busy | ReferenceDiverged | Drift | Unsure


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """The runs weighed: the best (single where nothing beat it, or when in doubt), the
    runner-up, each candidate against single, and why the evidence cannot decide (None: it
    can)."""

    runs: tuple[Run, ...]
    best: Run
    runner: Run | None
    vs: dict[str, Comparison]
    doubt: Doubt | None
    tolerance: float
    known_cause: str | None
    untrained: Untrained | None
    device_type: str

    @property
    def single(self) -> Run:
        return self.runs[0]
