"""Text for `dpwise migrate`: the list of edits with their lint rules, and a refusal."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from dpwise.migrate.edits import Edit


def render_edits(edits: Sequence[Edit], out: Path | None) -> str:
    width = max(len(e.rule) for e in edits)
    counts = Counter((e.rule, e.what) for e in edits)  # the same change in several places: once
    lines = [f"{len(edits)} edits" + (f", written to {out}" if out else "") + ":"]
    lines += [
        f"  {rule:<{width}}  {what}" + (f" ({n} places)" if n > 1 else "")
        for (rule, what), n in counts.items()
    ]
    lines.append("run it with: torchrun --nproc_per_node=N " + (str(out) if out else "SCRIPT"))
    return "\n".join(lines)


def render_refusal(script: str, reasons: Sequence[str]) -> str:
    """One line per reason; nothing is written when a script is refused."""
    return "\n".join(f"{script}: not migrated: {reason}" for reason in reasons)


def render_verdict(verdict) -> str:  # type: ignore[no-untyped-def]
    """One line: the two runs' largest parameter difference against the tolerance."""
    from dpwise.migrate.verify import TOLERANCE

    word = "same model" if verdict.same else "DIFFERENT models"
    return (
        f"verify: {word}: after {verdict.steps} steps the original (each process alone) and "
        f"the migrated script ({verdict.nproc} processes, gloo) differ by at most "
        f"{verdict.max_abs_diff:.2e} (tolerance {TOLERANCE:.0e}); training moved a parameter "
        f"by up to {verdict.moved:.2e}"
    )
