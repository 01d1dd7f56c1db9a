"""The search's lines: durations, progress with the time left, the summary the terminal shows."""

from __future__ import annotations

from typing import Any

from dpwise.tune import decide
from dpwise.tune.journal import Journal


def duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _best(j: Journal, allow_lossy: bool) -> str:
    ranked = decide.ranked(j.candidates, allow_lossy, None)
    if not ranked:
        return "no configuration faster than the default yet"
    v = decide.verdict(ranked[0])
    return f"best so far {ranked[0].name}: {v.ratio:.2f}× ({v.low:.2f}–{v.high:.2f}×)"


def progress(j: Journal, left: float, allow_lossy: bool) -> str:
    active = sum(c.state == "active" for c in j.candidates)
    decided = sum(c.state != "active" for c in j.candidates)
    return (
        f"round {j.rounds}: {active} configuration(s) still measured, {decided} decided · "
        f"{_best(j, allow_lossy)} · {duration(left)} of the budget left"
    )


def ratio_text(entry: dict[str, Any]) -> str:
    if entry.get("ratio") is None:
        return "—"
    return f"{entry['ratio']:.2f}× ({entry['low']:.2f}–{entry['high']:.2f}×)"
