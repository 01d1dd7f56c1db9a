"""What `dpwise watch` and `dpwise diagnose` print: a rank's status line, and the diagnosis of a
hang in sentences (match.Diagnosis is the data); its JSON form for diagnosis.json."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from dpwise.watch.match import Diagnosis, Place, Straggler, Unequal
from dpwise.watch.state import RankState


def status(state: RankState, rate: float | None) -> str:
    """One rank's live line: its steps, rows per second, and its newest collective."""
    last = state.last
    coll = "no collective yet" if last is None else (
        f"last collective {last.name} ({'done' if last.done else 'waiting'})")  # fmt: skip
    speed = f", {rate:,.0f} samples/s" if rate is not None else ""
    return f"rank {state.rank}: step {state.steps}{speed}, {coll}"


def _short(said: str, most: int = 160) -> str:
    """The first line of what a rank said, at most ``most`` characters."""
    line = said.strip().splitlines()[0] if said.strip() else said
    return line if len(line) <= most else line[: most - 1] + "…"


OUT_OF_MEMORY = ("can't allocate memory", "out of memory", "MemoryError", "signal 9")


def _memory(ended: str) -> str:
    """' out of memory' where the end says so (the allocator's or CUDA's error; a SIGKILL is
    what the kernel's OOM killer sends, and says "likely")."""
    if "signal 9" in ended:
        return " (killed by signal 9: out of memory, likely)"
    return " out of memory" if any(m in ended for m in OUT_OF_MEMORY) else ""


def _at(p: Place) -> str:
    return f" at {p.line.where}" if p.line is not None else ""


def _doing(p: Place) -> str:
    if p.ended:
        return f"rank {p.rank} ended{_at(p)}{_memory(p.ended)}: its script {_short(p.ended)}"
    if p.waiting is not None:
        return f"rank {p.rank} waits in {p.waiting.name}{_at(p)}"
    last = (
        f" (its last collective: {p.last.name})" if p.last is not None else " (no collective yet)"
    )
    return f"rank {p.rank} is in no collective{_at(p)}{last}"


HEADS = {
    "exited": "a rank ended while the others waited for it",
    "different-collectives": "the ranks wait in different collectives: they took different paths",
    "behind": "some ranks wait in a collective that the others have not reached",
    "stalled": "every rank waits in the same collective",
    "no-collective": "no rank waits in a collective: the job waits on something of its own",
}


def diagnosis(d: Diagnosis, after: float | None) -> str:
    """The hang in a few lines: the cause, each culprit, what the others wait in, and lint's
    findings on the culprits' files; ``after``: the seconds no rank moved on (0: a rank ended
    the job; None: read from a folder, where the time is not known)."""
    culprits = [p for p in d.places if p.rank in d.culprits]
    head = (
        "the ranks' last states" if after is None
        else "the job ended" if after == 0
        else f"hang: no rank moved on for {after:g} s"
    )  # fmt: skip
    lines = [f"dpwise: {head}; {HEADS[d.cause]}"]
    lines += [f"  {_doing(p)}" for p in culprits]
    lines += [f"  {_doing(p)}" for p in d.waiters]
    lines += [f"  lint: {rule}" for rule in d.rules]
    return "\n".join(lines)


def to_json(d: Diagnosis, after: float | None) -> dict[str, Any]:
    return {"hang_after_s": after, **asdict(d)}


def unequal(u: Unequal) -> str:
    """Unequal batch counts, said at the ranks' first pass over the loader."""
    counts = ", ".join(f"rank {r} {n}" for r, n in sorted(u.batches.items()))
    waiting = ", ".join(str(r) for r in u.waiting)
    return (
        f"dpwise watch: the ranks' loader at {u.where.where} has different batch counts per "
        f"pass ({counts}): rank(s) {waiting} will wait at batch {u.fewest + 1} of each pass, in "
        f"a collective the others never make (give every rank the same number of batches: a "
        f"DistributedSampler, or drop_last=True)"
    )


def straggler(s: Straggler) -> str:
    return (
        f"dpwise watch: rank {s.rank} is a straggler: it reaches the collectives {s.lag_s:.2f} s "
        f"after the first rank (the median of {s.of} late collectives), and the others wait "
        f"for it"
    )
