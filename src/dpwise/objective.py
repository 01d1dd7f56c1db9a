"""The loss: which one (``--loss``) and how to read it off what a model's forward returns.

A forward may return logits as one tensor, a tuple (logits first, or the loss first when the model
computed one), a dict, or a transformers ``ModelOutput`` (``logits``, and ``loss`` when labels were
passed in). Every loss is mean-reduced: the equivalence contract needs it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.nn import functional as F

from dpwise.config import LOSSES
from dpwise.errors import DpwiseError

IGNORE_INDEX = -100  # the label transformers and F.cross_entropy skip


def model_loss(out: object) -> torch.Tensor | None:
    """The loss a model computed (``out.loss``, ``out['loss']``, a tuple's leading scalar)."""
    if isinstance(out, Mapping):
        loss = out.get("loss")
    elif isinstance(out, (tuple, list)) and out and isinstance(out[0], torch.Tensor):
        loss = out[0] if len(out) > 1 and _is_loss(out[0], out[1]) else None
    else:
        loss = getattr(out, "loss", None)
    if isinstance(loss, torch.Tensor):
        # DataParallel gathers one loss per GPU into a vector: their mean is the batch's loss.
        return loss.mean() if loss.dim() else loss
    return None


def _is_loss(first: torch.Tensor, second: object) -> bool:
    """A tuple's leading scalar, or the vector of one scalar per GPU DataParallel gathers: shorter
    than the batch of the logits that follow it."""
    if first.dim() == 0:
        return True
    return (
        first.dim() == 1
        and isinstance(second, torch.Tensor)
        and second.dim() >= 2
        and first.shape[0] < second.shape[0]
    )


def logits(out: object, origin: str) -> torch.Tensor:
    """The prediction tensor of a forward's output."""
    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, Mapping):
        if isinstance(out.get("logits"), torch.Tensor):
            return out["logits"]
        tensors = {k: v for k, v in out.items() if isinstance(v, torch.Tensor) and k != "loss"}
        if len(tensors) == 1:
            return next(iter(tensors.values()))
        keys = ", ".join(str(k) for k in out) or "nothing"
        raise DpwiseError(
            f"{origin}: forward returned a dict with {keys} but no 'logits'; return the logits "
            "(or a 'logits' key), or a 'loss' with --loss model"
        )
    if isinstance(out, (tuple, list)):
        tensors = [t for t in out if isinstance(t, torch.Tensor)]
        if len(tensors) > 1 and _is_loss(tensors[0], tensors[1]):
            return tensors[1]  # (loss, logits, …): what transformers returns with labels
        if tensors:
            return tensors[0]
    raise DpwiseError(
        f"{origin}: forward returned {type(out).__name__}; dpwise needs the logits as a tensor, "
        "a tuple or dict holding them, or a model output with 'logits' or 'loss'"
    )


class Objective:
    """``objective(out, y)``: one batch's mean-reduced loss; ``auto`` resolves on first use."""

    def __init__(self, kind: str, origin: str) -> None:
        if kind not in LOSSES:
            raise DpwiseError(f"--loss {kind!r} is not one of {', '.join(LOSSES)}")
        self.kind, self.origin = kind, origin
        self.seen_batch = False  # the model has run on a batch through this objective

    def __call__(self, out: object, y: torch.Tensor | None) -> torch.Tensor:
        if self.kind == "auto":
            self.kind = self.choose(out, y)
        if self.kind == "model":
            loss = model_loss(out)
            if loss is None:
                raise DpwiseError(
                    f"--loss model: {self.origin} returned no 'loss'; pass the labels in the "
                    "inputs (e.g. a 'labels' key) or choose another --loss"
                )
            return loss
        if y is None:
            raise DpwiseError(
                f"--loss {self.kind} needs targets, but the data gives inputs only; give (inputs, "
                "targets) pairs, or use --loss model with labels in the inputs"
            )
        pred = logits(out, self.origin)
        if self.kind == "mse":
            return _mse(pred, y, self.origin)
        return _cross_entropy(pred, y, token=self.kind == "token-cross-entropy", origin=self.origin)

    def choose(self, out: object, y: torch.Tensor | None) -> str:
        """auto: the model's own loss when it computed one, else what the targets call for."""
        if model_loss(out) is not None or y is None:
            return "model"
        if y.is_floating_point():
            return "mse"
        return "token-cross-entropy" if y.dim() >= 2 else "cross-entropy"


def _cross_entropy(pred: torch.Tensor, y: torch.Tensor, token: bool, origin: str) -> torch.Tensor:
    if y.is_floating_point():
        raise DpwiseError(
            f"{origin}: cross-entropy needs integer class labels, got {_dtype(y)} targets; "
            "use --loss mse for real-valued targets"
        )
    if token:
        if pred.dim() != y.dim() + 1 or pred.shape[:-1] != y.shape:
            raise DpwiseError(
                f"{origin}: token-cross-entropy needs logits (batch, tokens, vocab) for labels "
                f"(batch, tokens); got logits {_shape(pred)} and labels {_shape(y)}"
            )
        return F.cross_entropy(
            pred.reshape(-1, pred.shape[-1]).float(), y.reshape(-1), ignore_index=IGNORE_INDEX
        )
    if pred.dim() != 2 or y.dim() != 1 or pred.shape[0] != y.shape[0]:
        raise DpwiseError(
            f"{origin}: cross-entropy needs logits (batch, classes) and labels (batch,); got "
            f"logits {_shape(pred)} and labels {_shape(y)} (for sequences use --loss "
            "token-cross-entropy)"
        )
    return F.cross_entropy(pred, y)


def _mse(pred: torch.Tensor, y: torch.Tensor, origin: str) -> torch.Tensor:
    if pred.numel() != y.numel():
        raise DpwiseError(
            f"{origin}: mse needs outputs and targets of one size; got outputs {_shape(pred)} and "
            f"targets {_shape(y)}"
        )
    return F.mse_loss(pred.float(), y.reshape(pred.shape).float())


def _shape(t: torch.Tensor) -> str:
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).removeprefix("torch.")
