"""Checkpoints: written atomically (temporary file, then rename), read without unpickling."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from dpwise.atomic import atomic_file
from dpwise.errors import DpwiseError

FORMAT = "dpwise-checkpoint"
VERSION = 1
# Settings that must match for a resumed run to continue the same trajectory.
FINGERPRINT_KEYS = (
    "model",
    "model_args",
    "data",
    "data_args",
    "batch_size",
    "accum_steps",
    "seed",
    "optimizer",
    "precision",
    "lr",
    "momentum",
    "weight_decay",
)


def fingerprint(config_dict: dict[str, Any]) -> dict[str, Any]:
    return {key: config_dict[key] for key in FINGERPRINT_KEYS}


def atomic_torch_save(obj: Any, path: Path) -> None:
    with atomic_file(path, fsync=True) as fh:
        torch.save(obj, fh)


def save(path: Path, state: dict[str, Any]) -> None:
    atomic_torch_save({"format": FORMAT, "version": VERSION, **state}, path)


def load(path: Path, expected: dict[str, Any]) -> dict[str, Any]:
    """Read a checkpoint; refuse what is missing, truncated, foreign or from another workload."""
    if not path.is_file():
        raise DpwiseError(f"--resume {path}: no such checkpoint file")
    try:
        with warnings.catch_warnings():  # torch warns (several lines) about foreign pickles
            warnings.simplefilter("ignore")
            state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # truncated zip, foreign pickle, disallowed globals, ...
        raise DpwiseError(
            f"--resume {path}: not a readable checkpoint (truncated or not a dpwise file): "
            f"{refusal(exc)}"
        ) from None
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise DpwiseError(f"--resume {path}: not a dpwise checkpoint (no '{FORMAT}' marker)")
    if state.get("version") != VERSION:
        raise DpwiseError(
            f"--resume {path}: checkpoint version {state.get('version')} is not {VERSION}; "
            "resume it with the dpwise version that wrote it"
        )
    diffs = [
        f"{key} {state['fingerprint'].get(key)!r} → {expected[key]!r}"
        for key in FINGERPRINT_KEYS
        if state["fingerprint"].get(key) != expected[key]
    ]
    if diffs:
        raise DpwiseError(
            f"--resume {path}: the checkpoint was written with other settings "
            f"({'; '.join(diffs)}); resume with the original ones"
        )
    return state


def refusal(exc: BaseException) -> str:
    """Why torch.load refused a file, in one short line: the weights-only unpickler's own
    reason where it gave one (e.g. `Unsupported global: GLOBAL builtins.print ...`), else the
    first line, without torch's terminal escape codes."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()
    _, found, after = text.partition("WeightsUnpickler error:")
    if found and after.strip():
        return "refused by the weights-only loader: " + _sentence(after)
    return _sentence(text) or type(exc).__name__


def _sentence(text: str) -> str:
    first = (text.strip().splitlines() or [""])[0]
    return first.split(". ")[0].rstrip(".")[:160]
