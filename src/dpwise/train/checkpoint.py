"""Checkpoints: written atomically (temporary file, then rename), read without unpickling."""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import torch

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_file

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


def load(
    path: Path, expected: dict[str, Any], label: str | None = None, *, header_only: bool = False
) -> dict[str, Any]:
    """Read a checkpoint; refuse what is missing, truncated, foreign or from another workload.

    ``header_only``: map the file instead of reading it (``torch.load(mmap=True)``): the
    settings, position and every tensor's name and shape are checked, no tensor's bytes are
    read. For a process that only checks a checkpoint another process will load."""
    label = label or f"--resume {path}"
    if not path.is_file():
        raise DpwiseError(f"{label}: no such checkpoint file")
    state = _read(path, label, header_only)
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise DpwiseError(f"{label}: not a dpwise checkpoint (no '{FORMAT}' marker)")
    if state.get("version") != VERSION:
        raise DpwiseError(
            f"{label}: checkpoint version {state.get('version')} is not {VERSION}; "
            "resume it with the dpwise version that wrote it"
        )
    _check_structure(state, label)
    diffs = [
        f"{key} {state['fingerprint'].get(key)!r} → {expected[key]!r}"
        for key in FINGERPRINT_KEYS
        if state["fingerprint"].get(key) != expected[key]
    ]
    if diffs:
        raise DpwiseError(
            f"{label}: the checkpoint was written with other settings "
            f"({'; '.join(diffs)}); resume with the original ones"
        )
    return state


def _read(path: Path, label: str, header_only: bool) -> Any:
    with warnings.catch_warnings():  # torch warns (several lines) about foreign pickles
        warnings.simplefilter("ignore")
        if header_only:
            try:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except Exception:  # not mappable (e.g. not a zip): the full read says why, as before
                pass
        try:
            return torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # truncated zip, foreign pickle, disallowed globals, ...
            raise DpwiseError(
                f"{label}: not a readable checkpoint (truncated or not a dpwise file): "
                f"{refusal(exc)}"
            ) from None


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


# What save() writes, by type: a file without one of these was not written by it.
_PARTS = {
    "fingerprint": dict,
    "model": dict,
    "optimizer": dict,
    "scaler": dict,
    "rng": list,
    "position": dict,
    "losses": list,
    "epochs": list,
}
_POSITION = ("epoch", "step_in_epoch", "global_steps")


def _check_structure(state: dict[str, Any], label: str) -> None:
    damaged = f"{label}: a damaged checkpoint"
    for key, kind in _PARTS.items():
        if not isinstance(state.get(key), kind):
            raise DpwiseError(f"{damaged} (its '{key}' is missing or not a {kind.__name__})")
    missing = [key for key in FINGERPRINT_KEYS if key not in state["fingerprint"]]
    if missing:
        raise DpwiseError(f"{damaged} (its fingerprint lacks {', '.join(missing)})")
    pos = state["position"]
    if not all(isinstance(pos.get(k), int) and pos[k] >= 0 for k in _POSITION):
        raise DpwiseError(f"{damaged} (position {pos!r} is not {_POSITION} counts)")
    if not all(isinstance(t, torch.Tensor) for t in state["model"].values()):
        raise DpwiseError(f"{damaged} (its 'model' holds something other than tensors)")


def check_position(state: dict[str, Any], label: str, steps: int, total: int) -> None:
    """The position must lie on this run's path: ``steps`` per epoch, ``total`` steps in all."""
    pos = state["position"]
    epoch, step, done = pos["epoch"], pos["step_in_epoch"], pos["global_steps"]
    if step > steps or done != epoch * steps + step:
        raise DpwiseError(
            f"{label}: position epoch {epoch}, step {step}, global step {done} does not fit "
            f"{steps} steps per epoch; the data set changed since it was written, or the file "
            "is damaged"
        )
    if done > total:
        raise DpwiseError(
            f"{label}: the checkpoint is at step {done}, past the end of this run ({total} "
            "steps); raise --epochs or --max-steps to continue it"
        )


def check_model(state: dict[str, Any], label: str, model: torch.nn.Module) -> None:
    """The saved parameters must be the model's own, name for name and shape for shape."""
    saved = state["model"]
    own = model.state_dict()
    missing = [k for k in own if k not in saved]
    extra = [k for k in saved if k not in own]
    shapes = [
        f"{k} {tuple(saved[k].shape)} → {tuple(v.shape)}"
        for k, v in own.items()
        if k in saved and tuple(saved[k].shape) != tuple(v.shape)
    ]
    if missing or extra or shapes:
        parts = [f"missing {_few(missing)}"] if missing else []
        parts += [f"unexpected {_few(extra)}"] if extra else []
        parts += [f"shapes differ: {_few(shapes)}"] if shapes else []
        raise DpwiseError(
            f"{label}: the checkpoint's parameters are not this model's ({'; '.join(parts)}); "
            "the model factory changed since it was written: resume with the original model"
        )


def _few(items: list[str], limit: int = 3) -> str:
    more = f" and {len(items) - limit} more" if len(items) > limit else ""
    return ", ".join(items[:limit]) + more
