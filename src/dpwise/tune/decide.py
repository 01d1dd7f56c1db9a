"""The search's decisions, from figures only (no torch): each candidate against the default,
round by round, with compare's rule and thresholds; when to stop measuring one; the winner."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpwise.compare.checks.base import Comparison, judge
from dpwise.compare.checks.thresholds import CONFIDENCE, SPEED_MARGIN
from dpwise.tune.space import Candidate

MIN_ROUNDS = 6  # the fewest paired rounds whose order-statistic interval covers 95 %
MAX_ROUNDS = 12  # an interval that still crosses the margin gets rounds up to this many
PRUNE_AFTER = 2  # after this many rounds, a candidate none of whose rounds gained 5 % stops

RULE = (
    f"Every configuration trains from the same initial state on the same batches as the default, "
    f"in interleaved rounds (each round trains the default and every configuration still "
    f"measured once, in a rotating order); the speed-up of a round is the default's time over "
    f"the configuration's. A configuration counts as faster only when the whole {CONFIDENCE:.0%} "
    f"interval of its per-round speed-ups (the sign-test interval of the median) lies at or "
    f"above {SPEED_MARGIN:.2f}×, compare's rule and threshold. One that gained less than "
    f"{SPEED_MARGIN - 1:.0%} in each of its first {PRUNE_AFTER} rounds is no longer measured "
    f"(pruned)."
)


def comparison(c: Candidate) -> Comparison | None:
    """The candidate against the default over the rounds measured (None: none yet)."""
    if not c.pairs:
        return None
    default = [d for d, _ in c.pairs]
    mine = [s for _, s in c.pairs]
    # times, not rates: the default's time over the candidate's is the candidate's speed-up
    found = judge(default, mine, "the default's time", f"{c.name}'s")
    if found.coverage < CONFIDENCE:
        return Comparison(
            "inconclusive",
            found.ratio,
            found.low,
            found.high,
            found.coverage,
            found.rounds,
            f"measured in {found.rounds} round(s); a {CONFIDENCE:.0%} interval needs {MIN_ROUNDS}",
        )
    return found


def after_round(c: Candidate) -> None:
    """Whether the candidate goes on being measured: pruned after its first rounds when no round
    gained the margin, done at MIN_ROUNDS unless its interval still crosses the margin with a
    median beyond it (then up to MAX_ROUNDS)."""
    if c.state != "active":
        return
    rounds = len(c.pairs)
    ratios = [d / s for d, s in c.pairs if s > 0]
    if rounds >= PRUNE_AFTER and rounds < MIN_ROUNDS and max(ratios) < SPEED_MARGIN:
        c.state = "pruned"
        c.reason = (
            f"no gain in its first {rounds} rounds (best {max(ratios):.3f}×, below "
            f"{SPEED_MARGIN:.2f}×): no longer measured"
        )
        return
    if rounds < MIN_ROUNDS:
        return
    found = comparison(c)
    unsure = found is not None and found.outcome == "inconclusive" and found.ratio >= SPEED_MARGIN
    if unsure and rounds < MAX_ROUNDS:
        return
    c.state = "done"


@dataclass(frozen=True)
class Verdict:
    outcome: str  # faster, same, slower, inconclusive; rejected, failed, pruned, skipped
    ratio: float | None
    low: float | None
    high: float | None
    rounds: int
    reason: str


def verdict(c: Candidate) -> Verdict:
    found = comparison(c)
    figures: tuple[Any, ...] = (None, None, None, 0)
    if found is not None:
        figures = (found.ratio, found.low, found.high, found.rounds)
    if c.state in ("rejected", "failed", "skipped"):
        return Verdict(c.state, *figures, c.reason)
    if c.state == "pruned":
        return Verdict("pruned", *figures, c.reason)
    if found is None:
        return Verdict("inconclusive", *figures, c.reason or "not measured: the budget ran out")
    return Verdict(found.outcome, *figures, found.reason)


def eligible(c: Candidate, allow_lossy: bool, limit: int | None) -> bool:
    """May the candidate be recommended: faster, equivalent (or lossy and allowed), within
    --device-memory."""
    if verdict(c).outcome != "faster":
        return False
    if c.lossy and not allow_lossy:
        return False
    if not c.lossy and c.equivalent is False:
        return False
    return limit is None or c.peak_memory is None or c.peak_memory <= limit


def ranked(candidates: list[Candidate], allow_lossy: bool, limit: int | None) -> list[Candidate]:
    """The recommendable candidates, best first: the highest lower end of the interval (the
    speed-up the user can count on), then the median."""
    ok = [c for c in candidates if eligible(c, allow_lossy, limit)]
    return sorted(ok, key=lambda c: (verdict(c).low or 0.0, verdict(c).ratio or 0.0), reverse=True)
