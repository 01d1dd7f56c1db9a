"""Text for `dpwise migrate`: the list of edits with their lint rules, and a refusal."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpwise.advise.jobscript import as_argument
from dpwise.diagnosis.layers import group
from dpwise.migrate.edits import Edit

if TYPE_CHECKING:
    from dpwise.migrate.verify import Verdict


def render_edits(edits: Sequence[Edit[Any]], out: Path | None) -> str:
    width = max(len(e.rule) for e in edits)
    counts = Counter((e.rule, e.what) for e in edits)  # the same change in several places: once
    lines = [f"{len(edits)} edits" + (f", written to {out}" if out else "") + ":"]
    lines += [
        f"  {rule:<{width}}  {what}" + (f" ({n} places)" if n > 1 else "")
        for (rule, what), n in counts.items()
    ]
    script = shlex.quote(as_argument(out)) if out else "SCRIPT"
    lines.append(f"run it with: torchrun --nproc_per_node=N {script}")
    return "\n".join(lines)


def render_refusal(script: str, reasons: Sequence[str]) -> str:
    """One line per reason; nothing is written when a script is refused."""
    return "\n".join(f"{script}: not migrated: {reason}" for reason in reasons)


def render_verdict(verdict: Verdict) -> str:
    """The two runs' largest parameter difference against the tolerance; when they differ, what
    in the model makes them differ by design, or, when nothing does, where to look."""
    from dpwise.migrate.verify import TOLERANCE

    word = "same model" if verdict.same else "DIFFERENT models"
    if not verdict.same and verdict.explained:
        word += ", as expected for this model"
    head = (
        f"verify: {word}: after {verdict.steps} steps the original (each process alone) and "
        f"the migrated script ({verdict.nproc} processes, gloo) differ by at most "
        f"{verdict.max_abs_diff:.2e} (tolerance {TOLERANCE:.0e}); training moved a parameter "
        f"by up to {verdict.moved:.2e}"
    )
    if verdict.same:
        return head
    why = _causes(verdict) if verdict.explained else [_unexplained(verdict)]
    return "\n".join([head, *(f"  {line}" for line in why)])


def _causes(verdict: Verdict) -> list[str]:
    lines = []
    if verdict.batchnorm:
        lines.append(
            f"BatchNorm ({group(verdict.batchnorm)}): each process normalises with the "
            "statistics of its own share of the global batch, the original with the whole "
            "batch. For the same statistics convert them after building the model: "
            "model = torch.nn.SyncBatchNorm.convert_sync_batchnorm(model)."
        )
    if verdict.stochastic:
        found = "found by running the model" if verdict.found_by == "running" else "by class name"
        lines.append(
            f"random layers ({group(verdict.stochastic)}; {found}): each process draws its own "
            "random numbers for its own rows, so no mask equals the original's for the same "
            "rows; training with them is fine, the runs only differ by chance."
        )
    lines.append(
        "This difference is not a migration error; the parameters can only be compared "
        "within 1e-5 for a model without these layers (or with them in eval mode / p=0)."
    )
    return lines


def _unexplained(verdict: Verdict) -> str:
    how = (
        "a training forward was watched"
        if verdict.found_by == "running"
        else "only layer classes were read: raise --verify-steps to 2 or more to watch a forward"
    )
    return (
        f"Nothing in the model explains it: no BatchNorm and no random layer ({how}). Look at "
        "what the harness cannot fix: data order from a custom sampler or from shuffling or "
        "random augmentation inside the dataset, a loss summed or divided by a batch size by hand "
        "(use reduction='mean'), or an edit that changes what each process trains on."
    )
