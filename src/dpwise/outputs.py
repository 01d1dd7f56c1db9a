"""The run's files: final.pt (unwrapped state dict) and metrics.json, written by rank 0 only."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dpwise.atomic import atomic_files, atomic_write_text, remove_leftovers
from dpwise.errors import DpwiseError

RUN_FILES = ("final.pt", "metrics.json", "checkpoint.pt")  # what a training run writes in --out


def check_writable(out: Path) -> None:
    """Fail before any work if ``out`` cannot be created or written; create nothing."""
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise DpwiseError(f"--out {out}: {probe} exists and is not a folder; choose another --out")
    try:
        tempfile.TemporaryDirectory(dir=probe).cleanup()  # a real write: access() lies for root
    except OSError as exc:
        raise DpwiseError(
            f"--out {out}: cannot write in {probe} ({exc.strerror}); choose a folder you can write"
        ) from None


def write_json(obj: Any, path: Path) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def write_outputs(out: Path, model: nn.Module, metrics: dict[str, Any]) -> None:
    """final.pt and metrics.json appear together (both from this run) or not at all."""
    text = json.dumps(metrics, indent=2) + "\n"
    with atomic_files(out / "final.pt", out / "metrics.json", fsync=True) as (pt, js):
        torch.save(model.state_dict(), pt)
        js.write(text.encode("utf-8"))


def first_missing(out: Path) -> Path | None:
    """The outermost folder of ``out`` that does not exist yet (what a run would create)."""
    missing = None
    for folder in (out, *out.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def discard_partial(out: Path, created: Path | None) -> None:
    """After a run that did not finish: no temporary file of a killed writer stays in ``out``,
    and a folder this run created and left empty is removed."""
    if out.is_dir():
        remove_leftovers(out, RUN_FILES)
    if created is not None and created.is_dir() and not any(_files(created)):
        shutil.rmtree(created, ignore_errors=True)


def _files(folder: Path):
    return (p for p in folder.rglob("*") if not p.is_dir())
