"""The search's journal (``OUT/.search/journal.json``): everything measured so far, written
whole and atomically after every training, so that Ctrl-C, a failure or a lost machine keep
what was measured and `--resume` continues from it. The default's first-round state sits beside
it (``default.pt``): the reference every candidate's parameters are held to."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_write_text
from dpwise.tune.space import Candidate

FOLDER = ".search"
SCHEMA = 1
# settings a resumed search may change: how long it may run and what it prints; --out is where
# the search lives, not a setting of it (a folder moved, copied to another machine, or named
# another way, relative or absolute, continues)
MAY_CHANGE = {"budget", "resume", "overwrite", "quiet", "out"}


def folder(out: Path) -> Path:
    return out / FOLDER


def path(out: Path) -> Path:
    return folder(out) / "journal.json"


def reference_path(out: Path) -> Path:
    return folder(out) / "default.pt"


@dataclass
class Journal:
    settings: dict[str, Any]
    facts: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, int] | None = None  # {"warm": W, "timed": T}
    default: Candidate = field(default_factory=lambda: Candidate({}))
    candidates: list[Candidate] = field(default_factory=list)
    rounds: int = 0
    elapsed: float = 0.0  # seconds of the search, over every session
    prior: float = 0.0  # seconds of the sessions before this one
    training: float = 0.0  # seconds of the configurations' trainings (rounds), over sessions
    in_flight: str | None = None  # the configuration training now (a failure is its)
    staged: bool = False  # the second stage's combinations were added
    stopped: str | None = None  # finished, budget, interrupted, failed
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


def differences(saved: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The settings that differ from the saved search's (those a resume may change aside)."""
    return [
        f"--{k.replace('_', '-')} {saved.get(k)!r} → {now.get(k)!r}"
        for k in sorted(set(saved) | set(now))
        if k not in MAY_CHANGE and saved.get(k) != now.get(k)
    ]
