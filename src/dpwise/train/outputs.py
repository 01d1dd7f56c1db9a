"""The run's files: final.pt (unwrapped state dict) and metrics.json, written by rank 0 only."""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any

import torch

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_files, atomic_write_text

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


NON_FINITE_KEY = "non_finite_values"
_LISTED = 20  # paths named in the note; the count covers the rest


def finite_json(obj: Any) -> tuple[Any, dict[str, str]]:
    """``obj`` with every NaN or infinite float replaced by None, and {path: value} of them."""
    replaced: dict[str, str] = {}

    def clean(value: Any, path: str) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            replaced[path] = str(value)
            return None
        if isinstance(value, dict):
            return {k: clean(v, f"{path}.{k}" if path else str(k)) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v, f"{path}[{i}]") for i, v in enumerate(value)]
        return value

    return clean(obj, ""), replaced


def to_json(obj: Any) -> str:
    """Strict JSON (no bare NaN or Infinity): a non-finite number is written as null, and a dict
    gains ``non_finite_values`` saying which values were and why."""
    clean, replaced = finite_json(obj)
    if replaced and isinstance(clean, dict):
        listed = dict(list(replaced.items())[:_LISTED])
        clean[NON_FINITE_KEY] = {
            "why": "JSON has no NaN or Infinity: these numbers were not finite and are null here",
            "count": len(replaced),
            "values": listed,
        }
    return json.dumps(clean, indent=2, allow_nan=False) + "\n"


def write_json(obj: Any, path: Path) -> None:
    atomic_write_text(path, to_json(obj))


def write_outputs(out: Path, state: dict[str, torch.Tensor], metrics: dict[str, Any]) -> None:
    """final.pt (``state``: the full, unwrapped state dict) and metrics.json appear together
    (both from this run) or not at all."""
    text = to_json(metrics)
    with atomic_files(out / "final.pt", out / "metrics.json", fsync=True) as (pt, js):
        torch.save(state, pt)
        js.write(text.encode("utf-8"))


def written(out: Path) -> bool:
    """--out holds a run's final.pt and metrics.json (written together by write_outputs)."""
    return (out / "final.pt").is_file() and (out / "metrics.json").is_file()
