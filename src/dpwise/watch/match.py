"""A hang named from the ranks' last states (pure: no process is touched here). The ranks'
collectives are matched by sequence number: a collective completes only when every rank of
the group calls it, so the ranks that wait in one and the ranks that are elsewhere, or that
wait in another at the same number, tell which rank is behind and where.

Causes, in the order they are looked for:
- `exited`: a rank ended (returned, raised, exited, was killed) while others wait, or before
  the others ended too: the first to end is the one they waited for;
- `different-collectives`: every live rank waits, but not in the same collective (the ranks took
  different paths: a collective under a rank guard, one more batch on one rank);
- `behind`: some ranks wait in a collective while others are not in any: those are at their own
  line (a rank-0-only phase, an early return, fewer batches, a slow rank);
- `stalled`: every rank waits in the same collective (the transport, or a peer outside the job);
- `no-collective`: no rank waits in a collective (the job waits on something of its own).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from dpwise.watch.state import Collective, Frame, RankState

Cause = Literal["exited", "different-collectives", "behind", "stalled", "no-collective"]


@dataclass(frozen=True)
class Place:
    """Where one rank is: the collective it waits in (None: none), its line, and for a rank
    that ended, how."""

    rank: int
    waiting: Collective | None
    line: Frame | None
    last: Collective | None
    ended: str | None = None


@dataclass(frozen=True)
class Diagnosis:
    cause: Cause
    culprits: tuple[int, ...]  # the ranks the others wait for
    places: tuple[Place, ...]  # every rank, in rank order
    rules: tuple[str, ...] = field(default=())  # lint's findings on the culprits' files

    @property
    def waiters(self) -> tuple[Place, ...]:
        return tuple(p for p in self.places if p.rank not in self.culprits)


def place(state: RankState, ended: str | None = None) -> Place:
    return Place(state.rank, state.waiting, state.line, state.last, ended or state.ended)


def diagnose(states: list[RankState], ended: dict[int, str] | None = None) -> Diagnosis:
    """The cause of a hang from every rank's last state; ``ended``: the rank the launcher saw
    end first, and how (its exit code or signal), where its own state cannot say (a rank
    killed by a signal or out of memory writes nothing more)."""
    ended = ended or {}
    ordered = sorted(states, key=lambda s: s.rank)
    places = tuple(place(s, s.ended or ended.get(s.rank)) for s in ordered)
    gone = tuple(p.rank for p in places if p.ended)
    live = [p for p in places if not p.ended]
    waiting = [p for p in live if p.waiting is not None]
    if gone:  # the first rank to end: its last state is the oldest of the ended ones
        first = min((s for s in ordered if s.rank in gone), key=lambda s: s.time)
        return Diagnosis("exited", (first.rank,), places)
    if not waiting:
        return Diagnosis("no-collective", tuple(p.rank for p in live), places)
    if len(waiting) < len(live):
        return Diagnosis("behind", tuple(p.rank for p in live if p.waiting is None), places)
    calls = Counter(_call(p.waiting) for p in waiting if p.waiting is not None)
    if len(calls) == 1:
        return Diagnosis("stalled", (), places)
    (most, count), (_, second) = calls.most_common(2)
    odd = tuple(
        p.rank for p in waiting
        if p.waiting is not None and (count == second or _call(p.waiting) != most))  # fmt: skip
    return Diagnosis("different-collectives", odd, places)


def _call(c: Collective) -> tuple[int, str, tuple[tuple[int, ...], ...]]:
    return c.seq, c.op, c.sizes


def stuck(history: dict[int, list[tuple[float, tuple[int, int, int]]]], now: float, after: float
          ) -> bool:  # fmt: skip
    """Whether no rank has moved on for ``after`` seconds: each rank's (time, progress) pairs,
    as the states were read."""
    if not history:
        return False
    for seen in history.values():
        if not seen:
            return False
        current = seen[-1][1]
        since = next((t for t, p in seen if p == current), seen[-1][0])
        if now - since < after:
            return False
    return True


@dataclass(frozen=True)
class Unequal:
    """The ranks' first passes over the same loader (the i-th each iterated) have different
    batch counts: the ranks with more will wait at batch ``fewest + 1`` in a collective the
    others never make."""

    loader: int  # which loader: the i-th each rank iterated
    batches: dict[int, int]  # rank: batches per pass
    where: Frame

    @property
    def fewest(self) -> int:
        return min(self.batches.values())

    @property
    def waiting(self) -> tuple[int, ...]:
        """The ranks that will wait: those with more batches than the fewest."""
        return tuple(r for r, n in sorted(self.batches.items()) if n > self.fewest)


def unequal_batches(states: list[RankState], world: int) -> Unequal | None:
    """The first loader whose batch counts differ between the ranks, once every rank of
    ``world`` has iterated it."""
    if len(states) < world or world < 2:
        return None
    for i in range(min(len(s.loaders) for s in states)):
        counts = {s.rank: s.loaders[i].batches for s in states}
        if len(set(counts.values())) > 1:
            return Unequal(i, counts, states[0].loaders[i].where)
    return None


@dataclass(frozen=True)
class Straggler:
    """A rank that reaches the collectives later than the others, consistently."""

    rank: int
    lag_s: float  # the median of its lags behind the first rank to arrive
    of: int  # over how many collectives


STRAGGLER_SHARE = 0.8  # the share of the late collectives it must be the last to
STRAGGLER_MIN_S = 0.05  # a collective whose arrivals spread less is on time
STRAGGLER_SEEN = 4  # late collectives, at least


def straggler(states: list[RankState]) -> Straggler | None:
    """The rank that arrives last at ≥ STRAGGLER_SHARE of the late collectives (those whose
    arrivals spread over STRAGGLER_MIN_S or more) among the newest that every rank made,
    matched by group and sequence number: the others wait for it each time. (A step with
    several collectives is late at its first only: the others wait there.)"""
    if len(states) < 2:
        return None
    arrivals: dict[tuple[str, int], dict[int, int]] = {}
    for s in states:
        for c in s.collectives:
            if c.created_ns:
                arrivals.setdefault((c.group, c.seq), {})[s.rank] = c.created_ns
    late = [
        a for a in arrivals.values()
        if len(a) == len(states) and max(a.values()) - min(a.values()) >= STRAGGLER_MIN_S * 1e9
    ]  # fmt: skip
    if len(late) < STRAGGLER_SEEN:
        return None
    rank, times = Counter(max(a, key=lambda r: a[r]) for a in late).most_common(1)[0]
    if times < STRAGGLER_SHARE * len(late):
        return None
    lags = sorted((a[rank] - min(a.values())) / 1e9 for a in late)
    return Straggler(rank, lags[len(lags) // 2], len(late))
