"""The search's journal (``OUT/.search/journal.json``): everything measured so far, written
whole and atomically after every training, so that Ctrl-C, a failure or a lost machine keep
what was measured and `--resume` continues from it. The default's first-round state sits beside
it (``default.pt``): the reference every candidate's parameters are held to. A worker whose
candidate fails records the failure beside it too (``failed-RANK.json``: kind, rank, message),
for the session that starts the workers again.

Its records: each candidate (its configuration, state, rounds and proof), the facts the search
found, the steps of a training, a failure.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_write_text

FOLDER = ".search"
SCHEMA = 1
# settings a resumed search may change: how long it may run and what it prints; --out is where
# the search lives, not a setting of it (a folder moved, copied to another machine, or named
# another way, relative or absolute, continues)
MAY_CHANGE = {"budget", "resume", "overwrite", "quiet", "out"}
_FAILED = "failed-*.json"

Stopped = Literal["finished", "budget", "interrupted", "failed"]

State = Literal["active", "done", "pruned", "rejected", "failed", "skipped"]
"""A candidate's state: measured still (active), measured to the end (done), no longer measured
(pruned), refused for what it did (rejected: not the default's model, a non-finite loss, above
--device-memory), failed while it trained, or left out before it ran (skipped)."""


class Drift(TypedDict, total=False):
    """How far a configuration's training went from the default's: the default's own holds
    only its first round's losses, a candidate's the proof (its parameters against the
    default's final state, its loss curve against the default's)."""

    losses: list[float]
    max_param_diff: float
    largest_in: str | None  # None: no tensor differed
    beyond_tolerance: list[str]
    loss_distance: float
    steps: int


@dataclass
class Candidate:
    config: dict[str, Any]
    lossy: bool = False
    state: State = "active"
    reason: str = ""
    stage: int = 1
    pairs: list[list[float]] = field(default_factory=list)  # [default s, candidate s] by round
    totals: list[float] = field(default_factory=list)  # whole trainings, seconds
    peak_memory: int | None = None
    drift: Drift | None = None
    equivalent: bool | None = None

    @property
    def name(self) -> str:
        return name_of(self.config)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "lossy": self.lossy,
            "state": self.state,
            "reason": self.reason,
            "stage": self.stage,
            "pairs": self.pairs,
            "totals": self.totals,
            "peak_memory": self.peak_memory,
            "drift": self.drift,
            "equivalent": self.equivalent,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Candidate:
        return cls(**raw)


def name_of(config: dict[str, Any]) -> str:
    if not config:
        return "default"
    return " + ".join(
        k if v is True else f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in sorted(config.items())
    )


def is_lossy(config: dict[str, Any]) -> bool:
    return config.get("comm_hook", "none") != "none"


class Steps(TypedDict):
    """The steps of every training: warm-up, then timed."""

    warm: int
    timed: int


class SearchFacts(TypedDict):
    """What the session found before the search: the model's gradients, the job, the model."""

    gradient_bytes: int
    backend: str
    device_type: str
    world_size: int
    nproc_per_node: int
    varying: str  # parameters used in some steps only ("" when none)
    sparse: str  # layers that give sparse gradients ("" when none)
    find_unused_parameters: bool


FailureKind = Literal["error", "out_of_memory"]  # a DpwiseError (a refusal), or out of memory


@dataclass(frozen=True)
class Failure:
    """A candidate that failed while it trained, as the worker that saw it records it."""

    kind: FailureKind
    rank: int
    candidate: str
    message: str  # the error's first line


def folder(out: Path) -> Path:
    return out / FOLDER


def path(out: Path) -> Path:
    return folder(out) / "journal.json"


def reference_path(out: Path) -> Path:
    return folder(out) / "default.pt"


@dataclass
class Journal:
    settings: dict[str, Any]  # TuneConfig.to_dict(), less MAY_CHANGE: what a resume must match
    facts: SearchFacts
    steps: Steps | None = None
    default: Candidate = field(default_factory=lambda: Candidate({}))
    candidates: list[Candidate] = field(default_factory=list)
    rounds: int = 0
    elapsed: float = 0.0  # seconds of the search, over every session
    prior: float = 0.0  # seconds of the sessions before this one
    training: float = 0.0  # seconds of the configurations' trainings (rounds), over sessions
    in_flight: str | None = None  # the configuration training now (a failure is its)
    staged: bool = False  # the second stage's combinations were added
    stopped: Stopped | None = None
    sessions: int = 0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "settings": self.settings,
            "facts": self.facts,
            "steps": self.steps,
            "default": self.default.to_json(),
            "candidates": [c.to_json() for c in self.candidates],
            "rounds": self.rounds,
            "elapsed": self.elapsed,
            "prior": self.prior,
            "training": self.training,
            "in_flight": self.in_flight,
            "staged": self.staged,
            "stopped": self.stopped,
            "sessions": self.sessions,
            "notes": self.notes,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Journal:
        return cls(
            settings=raw["settings"],
            facts=raw["facts"],
            steps=raw["steps"],
            default=Candidate.from_json(raw["default"]),
            candidates=[Candidate.from_json(c) for c in raw["candidates"]],
            rounds=raw["rounds"],
            elapsed=raw["elapsed"],
            prior=raw["prior"],
            training=raw["training"],
            in_flight=raw["in_flight"],
            staged=raw["staged"],
            stopped=raw["stopped"],
            sessions=raw["sessions"],
            notes=raw["notes"],
        )

    def find(self, name: str) -> Candidate | None:
        if name == self.default.name:
            return self.default
        return next((c for c in self.candidates if c.name == name), None)


def write(out: Path, journal: Journal) -> None:
    target = path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, json.dumps(journal.to_json(), indent=1))


def read(out: Path) -> Journal | None:
    target = path(out)
    if not target.is_file():
        return None
    try:
        raw = json.loads(target.read_text())
        if raw.get("schema") != SCHEMA:
            raise ValueError(f"schema {raw.get('schema')!r}, not {SCHEMA}")
        return Journal.from_json(raw)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DpwiseError(
            f"{target} is not a search journal dpwise can continue ({exc}); start afresh with "
            "--overwrite"
        ) from None


def measured(out: Path, journal: Journal | None) -> bool:
    """The search holds a measurement: a round, or the default's reference state. Only a search
    that measured nothing may be removed when its command fails."""
    return journal is not None and (journal.rounds > 0 or reference_path(out).is_file())


def record_failure(out: Path, failure: Failure) -> None:
    """A worker's record of its candidate's failure, beside the journal (each rank its own)."""
    target = folder(out) / _FAILED.replace("*", str(failure.rank))
    with contextlib.suppress(OSError):  # a full disk: the launcher's own line says it still
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(target, json.dumps(asdict(failure)))


def failures(out: Path) -> list[Failure]:
    """The failures the workers recorded since the last clear_failures, lowest rank first."""
    found = []
    for target in folder(out).glob(_FAILED):
        with contextlib.suppress(OSError, ValueError, TypeError):
            found.append(Failure(**json.loads(target.read_text())))
    return sorted(found, key=lambda f: f.rank)


def clear_failures(out: Path) -> None:
    for target in folder(out).glob(_FAILED):
        target.unlink(missing_ok=True)


def differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The settings that differ from the saved search's (those a resume may change aside)."""
    return [
        f"--{k.replace('_', '-')} {saved.get(k)!r} → {now.get(k)!r}"
        for k in sorted(set(saved) | set(now))
        if k not in MAY_CHANGE and saved.get(k) != now.get(k)
    ]
