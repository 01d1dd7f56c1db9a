"""A compare's --out never holds a report about other runs than the ones beside it.

The runs write their files (runs/ID/final.pt, traces/ID.rank0.json) into a staging folder,
OUT/.dpwise-partial, while the previous report (if any) stays untouched beside its own runs. Only
when every run has finished are the files swapped in: first the old report and the files it named
are removed (from then on no report describes the old runs), then the new run files move in, and
the caller writes the new report, results.json last. A compare stopped before the swap leaves the
old report and its runs as they were; one stopped during the swap leaves no results.json.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from dpwise.infra import scratch
from dpwise.results.document import Results

STAGING = ".dpwise-partial"
REPORT_FILES = ("results.json", "report.html", "report.md")  # results.json first: the index


def staging(out: Path) -> Path:
    """A fresh staging folder inside ``out`` (a stale one, left by a killed compare, goes)."""
    folder = out / STAGING
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    scratch.own(scratch.TREE, folder)  # removed even if the command is killed
    return folder


def swap_in(stage: Path, out: Path) -> None:
    """Remove the old report and its files, then move the staged run files into ``out``."""
    remove_report(out)
    for path in sorted(p for p in stage.rglob("*") if p.is_file()):
        target = out / path.relative_to(stage)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    shutil.rmtree(stage, ignore_errors=True)


def remove_report(out: Path) -> None:
    """Remove a compare's report from ``out``: results.json first, the reports, then the run
    states, traces and plots it named."""
    stale = _named_by(out / "results.json")
    for name in REPORT_FILES:
        (out / name).unlink(missing_ok=True)
    for rel in stale:
        _remove(out, rel)


def _named_by(results: Path) -> list[str]:
    """The relative paths of the files an earlier results.json names (run states, traces,
    plots); nothing when it is missing or unreadable."""
    try:
        raw = json.loads(results.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(raw, dict):
        return []
    old = Results.from_json(raw)
    names = list((old.plots or {}).values())
    for run in old.runs:
        names += [str(p) for p in (run.final_state, run.trace) if p]
    return names


def _remove(out: Path, rel: str) -> None:
    """Unlink OUT/rel (never outside ``out``) and its parents below ``out`` when empty."""
    target = (out / rel).resolve()
    root = out.resolve()
    if root not in target.parents:
        return
    target.unlink(missing_ok=True)
    for folder in target.parents:
        if folder == root:
            break
        try:
            folder.rmdir()
        except OSError:
            break


def holds_runs(out: Path) -> bool:
    """Whether ``out`` holds measured runs (swapped in): what a failure must not remove."""
    try:
        return any((out / "runs").iterdir())
    except OSError:
        return False


def kept(out: Path) -> str:
    """What a compare that failed after its runs were swapped in leaves, in words."""
    index = "results.json" if (out / "results.json").is_file() else "no results.json"
    return (
        f"what was measured is kept in {out} (runs/, traces/, {index}); only the report was "
        "not written"
    )
