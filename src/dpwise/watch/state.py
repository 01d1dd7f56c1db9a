"""A rank's state as its watcher wrote it (userscript.watcher), typed: its steps and rows, the
collectives the Flight Recorder holds, and where its main thread is."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


def _machinery() -> tuple[str, ...]:
    """Where the machinery around a script lives (the interpreter's library, installed packages
    with torch, dpwise itself): a frame there is not a line the user wrote."""
    import sysconfig

    import dpwise

    places = {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    places.add(os.path.dirname(os.path.abspath(dpwise.__file__)))
    return (*sorted(p + os.sep for p in places), "<frozen ")


_NOT_THEIRS = _machinery()


@dataclass(frozen=True)
class Collective:
    """One collective as the Flight Recorder saw it in one rank."""

    seq: int
    op: str
    sizes: tuple[tuple[int, ...], ...]
    done: bool
    created_ns: int = 0  # when the rank called it (the machine's clock)
    group: str = ""

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Collective:
        sizes = tuple(tuple(int(n) for n in s) for s in d.get("sizes") or [])
        return cls(int(d["seq"]), str(d["op"]), sizes, bool(d["done"]),
                   int(d.get("created_ns", 0)), str(d.get("group", "")))  # fmt: skip

    @property
    def name(self) -> str:
        return f"{self.op} #{self.seq}"


@dataclass(frozen=True)
class Frame:
    file: str
    line: int
    function: str

    @property
    def where(self) -> str:
        return f"{os.path.basename(self.file)} line {self.line}"

    @property
    def theirs(self) -> bool:
        """A line the user wrote (not torch's, dpwise's or the interpreter's)."""
        return not self.file.startswith(_NOT_THEIRS)


@dataclass(frozen=True)
class Loader:
    """A DataLoader a rank iterated: its batches per pass, and the line that iterates it."""

    batches: int
    where: Frame


@dataclass(frozen=True)
class RankState:
    """What one rank's watcher last wrote."""

    rank: int
    pid: int
    time: float
    steps: int
    rows: int
    collectives: tuple[Collective, ...]
    stack: tuple[Frame, ...]
    ended: str | None
    loaders: tuple[Loader, ...] = ()

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RankState:
        return cls(
            rank=int(d["rank"]),
            pid=int(d["pid"]),
            time=float(d["time"]),
            steps=int(d["steps"]),
            rows=int(d.get("rows", 0)),
            collectives=tuple(Collective.from_json(c) for c in d.get("collectives") or []),
            stack=tuple(Frame(str(f), int(n), str(fn)) for f, n, fn in d.get("stack") or []),
            ended=d.get("ended"),
            loaders=tuple(
                Loader(int(x["batches"]), Frame(str(x["file"]), int(x["line"]), ""))
                for x in d.get("loaders") or []
            ),
        )

    @property
    def waiting(self) -> Collective | None:
        """The oldest collective it called that has not completed: where it waits."""
        return next((c for c in self.collectives if not c.done), None)

    @property
    def last(self) -> Collective | None:
        return self.collectives[-1] if self.collectives else None

    @property
    def progress(self) -> tuple[int, int, int]:
        """What changes while the rank moves on: its steps, its newest collective and how
        many of its collectives completed."""
        last = self.last
        return self.steps, last.seq if last else 0, sum(c.done for c in self.collectives)

    @property
    def line(self) -> Frame | None:
        """The innermost frame of the user's own code (else the innermost of all)."""
        theirs = [f for f in self.stack if f.theirs]
        frames = theirs or list(self.stack)
        return frames[-1] if frames else None

    @property
    def files(self) -> list[str]:
        """The user's files on its stack, innermost first."""
        seen: list[str] = []
        for f in reversed(self.stack):
            if f.theirs and f.file not in seen:
                seen.append(f.file)
        return seen
