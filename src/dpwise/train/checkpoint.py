"""Checkpoints: written atomically (temporary file, then rename), read without unpickling."""

from __future__ import annotations

import re
import warnings
from dataclasses import MISSING, Field, fields
from pathlib import Path
from typing import Any, TypedDict, cast

import torch

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_file
from dpwise.train.result import EpochRecord

FORMAT = "dpwise-checkpoint"
VERSION = 1
_LAUNCH = "where and how the workers are started, and how long they wait: not what they compute"
_LOSSLESS = (
    "lossless: how gradients travel or where state lives, not the update (tested against "
    "single's model); the checkpoint is the same for any value"
)
# The settings that do not change the trajectory a checkpoint continues, each with the reason.
# Every other TrainConfig setting is in the fingerprint: a new setting is compared on --resume
# until someone lists it here, so the fingerprint cannot fall behind the settings.
SAME_TRAJECTORY = {
    "strategy": "every strategy trains single's model (the equivalence contract) and writes "
    "the same checkpoint: any strategy resumes any strategy's",
    "nproc": "the batch is global: the processes split it, the step is the same",
    **dict.fromkeys(("nnodes", "node_rank", "min_nnodes", "rdzv_endpoint", "rdzv_backend",
                     "rdzv_id", "cluster", "max_restarts", "timeout", "dry_run"), _LAUNCH),
    "device": "the same arithmetic on another device (the equivalence contract)",
    "backend": "the same sums over another transport (the equivalence contract)",
    "threads": "CPU threads per process: the same arithmetic",
    "epochs": "where the run stops, not its path (raised to continue a run)",
    "max_steps": "where the run stops, not its path (raised to continue a run)",
    **dict.fromkeys(("out", "checkpoint_every", "resume", "overwrite", "quiet"),
                    "what is written and said, and where"),
    **dict.fromkeys(("find_unused_parameters", "static_graph", "bucket_cap_mb",
                     "gradient_as_bucket_view", "zero1", "reshard_after_forward",
                     "shard_units", "compile"), _LOSSLESS),
}  # fmt: skip
# What every dpwise checkpoint records: a fingerprint without one of these is damaged. A key
# added to the fingerprint later may be missing from an older checkpoint (_differences).
RECORDED_FROM_THE_START = ("model", "model_args", "data", "data_args", "batch_size",
                           "accum_steps", "seed", "optimizer", "precision", "lr", "momentum",
                           "weight_decay")  # fmt: skip


class Position(TypedDict):
    """Where the run stands: the epoch under way (0-based), the steps done in it and in all."""

    epoch: int
    step_in_epoch: int
    global_steps: int


class PartialEpoch(TypedDict):
    """The epoch under way: its steps' losses so far and the seconds they took."""

    losses: list[float]
    seconds: float


class _Parts(TypedDict):
    fingerprint: dict[str, Any]  # the settings that fix the trajectory (FINGERPRINT_KEYS)
    model: dict[str, torch.Tensor]  # the whole, unwrapped model's state dict
    optimizer: dict[str, Any]
    scaler: dict[str, Any]  # the gradient scaler's (fp16), else empty
    rng: list[dict[str, torch.Tensor]]  # every rank's generators: "cpu", and "cuda" on a GPU
    position: Position
    losses: list[float]  # of the finished epochs
    epochs: list[EpochRecord]  # the finished epochs


class Checkpoint(_Parts, total=False):
    """What checkpoint.pt holds (save writes it, load checks it). An older file may lack
    ``hook`` (before PowerSGD's state) and ``partial_epoch`` (before mid-epoch resumes)."""

    format: str  # FORMAT
    version: int  # VERSION
    run_id: str | None  # the launch that wrote it
    hook: list[dict[str, Any]] | None  # every rank's communication hook state (PowerSGD's)
    partial_epoch: PartialEpoch


def _fingerprint_keys() -> tuple[str, ...]:
    from dpwise.train.config import TrainConfig

    return tuple(f.name for f in fields(TrainConfig) if f.name not in SAME_TRAJECTORY)


# Settings that must match for a resumed run to continue the same trajectory: every setting
# SAME_TRAJECTORY does not name (the loss and --comm-hook among them).
FINGERPRINT_KEYS = _fingerprint_keys()


def fingerprint(config_dict: dict[str, Any]) -> dict[str, Any]:
    return {key: config_dict[key] for key in FINGERPRINT_KEYS}


def _default(name: str) -> Any:
    """TrainConfig's default for the setting ``name``."""
    from dpwise.train.config import TrainConfig

    f: Field[Any] = next(f for f in fields(TrainConfig) if f.name == name)
    factory = f.default_factory
    return factory() if f.default is MISSING and callable(factory) else f.default


def _differences(saved: dict[str, Any], expected: dict[str, Any], label: str) -> list[str]:
    """The settings the checkpoint was written with that this run changes. A key the
    checkpoint predates (an earlier dpwise did not record it) stands for its default: such a
    run is resumed only with the default, and refused in one line naming the setting else."""
    for key in FINGERPRINT_KEYS:
        if key not in saved and expected[key] != _default(key):
            raise DpwiseError(
                f"{label}: the checkpoint does not record {key} (an earlier dpwise wrote it); "
                f"it resumes only with the default {key} {_default(key)!r}, not "
                f"{expected[key]!r}: give that, or start afresh with --overwrite"
            )
    was = {key: saved[key] if key in saved else _default(key) for key in FINGERPRINT_KEYS}
    return [
        f"{key} {was[key]!r} → {expected[key]!r}"
        for key in FINGERPRINT_KEYS
        if was[key] != expected[key]
    ]


def atomic_torch_save(obj: Any, path: Path) -> None:
    with atomic_file(path, fsync=True) as fh:
        torch.save(obj, fh)


def save(path: Path, state: Checkpoint) -> None:
    atomic_torch_save({"format": FORMAT, "version": VERSION, **state}, path)


def load(
    path: Path, expected: dict[str, Any], label: str | None = None, *, header_only: bool = False
) -> Checkpoint:
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
    diffs = _differences(state["fingerprint"], expected, label)
    if diffs:
        raise DpwiseError(
            f"{label}: the checkpoint was written with other settings "
            f"({'; '.join(diffs)}); resume with the original ones"
        )
    return cast(Checkpoint, state)


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
    if not isinstance(state.get("hook"), (list, type(None))):  # absent before PowerSGD's state
        raise DpwiseError(f"{damaged} (its 'hook' is not a list)")
    missing = [key for key in RECORDED_FROM_THE_START if key not in state["fingerprint"]]
    if missing:
        raise DpwiseError(f"{damaged} (its fingerprint lacks {', '.join(missing)})")
    pos = state["position"]
    if not all(isinstance(pos.get(k), int) and pos[k] >= 0 for k in _POSITION):
        raise DpwiseError(f"{damaged} (position {pos!r} is not {_POSITION} counts)")
    if not all(isinstance(t, torch.Tensor) for t in state["model"].values()):
        raise DpwiseError(f"{damaged} (its 'model' holds something other than tensors)")


def check_position(state: Checkpoint, label: str, steps: int, total: int) -> None:
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


def check_model(state: Checkpoint, label: str, model: torch.nn.Module) -> None:
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
