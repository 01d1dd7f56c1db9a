"""The run's files: final.pt (unwrapped state dict) and metrics.json, written by rank 0 only."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from torch import nn

from dpwise.atomic import atomic_write_text
from dpwise.checkpoint import atomic_torch_save
from dpwise.errors import DpwiseError

CHECKPOINT = "checkpoint.pt"


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


def check_checkpoint(out: Path, resuming: bool, overwrite: bool) -> None:
    """Refuse to start over another run's checkpoint.pt unless resuming or told to overwrite."""
    if resuming or overwrite or not (out / CHECKPOINT).exists():
        return
    raise DpwiseError(
        f"--out {out} holds another run's {CHECKPOINT}; continue that run with --resume, "
        "start afresh with --overwrite, or choose another --out"
    )


def remove_checkpoint(out: Path | None) -> None:
    """--overwrite: the other run's checkpoint goes when this run starts."""
    if out is not None:
        (out / CHECKPOINT).unlink(missing_ok=True)


def write_json(obj: Any, path: Path) -> None:
    atomic_write_text(path, json.dumps(obj, indent=2) + "\n")


def write_outputs(out: Path, model: nn.Module, metrics: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(model.state_dict(), out / "final.pt")
    write_json(metrics, out / "metrics.json")
