"""The loss: which one (``--loss``) and how to read it off what a model's forward returns.

A forward may return logits as one tensor, a tuple (logits first, or the loss first when the model
computed one), a dict, or a transformers ``ModelOutput`` (``logits``, and ``loss`` when labels were
passed in). Every loss is mean-reduced: the equivalence contract needs it.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch.nn import functional as F

from dpwise.errors import DpwiseError
from dpwise.workload.settings import LOSSES

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
        parts = [t for t in out if isinstance(t, torch.Tensor)]
        if len(parts) > 1 and _is_loss(parts[0], parts[1]):
            return parts[1]  # (loss, logits, …): what transformers returns with labels
        if parts:
            return parts[0]
    raise DpwiseError(
        f"{origin}: forward returned {type(out).__name__}; dpwise needs the logits as a tensor, "
        "a tuple or dict holding them, or a model output with 'logits' or 'loss'"
    )


class Objective:
    """``objective(out, y)``: one batch's mean-reduced loss; ``auto`` resolves on first use.

    The first batch is checked against the outputs (class labels within the model's classes);
    ``all_labels``, when the loop sets it (the data set's targets as one tensor), is checked then
    in full, so a bad label anywhere fails before training instead of at its step.
    """

    def __init__(self, kind: str, origin: str) -> None:
        if kind not in LOSSES:
            raise DpwiseError(f"--loss {kind!r} is not one of {', '.join(LOSSES)}")
        self.kind, self.origin = kind, origin
        self.seen_batch = False  # the model has run on a batch through this objective
        self.all_labels: torch.Tensor | None = None

    def __call__(self, out: object, y: torch.Tensor | None) -> torch.Tensor:
        if self.seen_batch:
            return self._loss(out, y, None)
        auto = self.kind == "auto"
        if auto:
            self.kind = self.choose(out, y)
        try:
            return self._loss(out, y, y if self.all_labels is None else self.all_labels)
        except DpwiseError as exc:
            if not auto or y is None or self.kind not in ("mse", "token-cross-entropy"):
                raise
            why = "float" if self.kind == "mse" else "2-D"
            chose = (
                f"--loss auto chose {self.kind} for {why} targets ({_dtype(y)} {_shape(y)}); "
                "class labels are integers of shape (batch,)"
            )
            raise DpwiseError(f"{exc} ({chose})") from None

    def _loss(
        self, out: object, y: torch.Tensor | None, check: torch.Tensor | None
    ) -> torch.Tensor:
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
        token = self.kind == "token-cross-entropy"
        return _cross_entropy(pred, y, token, self.origin, check)

    def choose(self, out: object, y: torch.Tensor | None) -> str:
        """auto: the model's own loss when it computed one, else what the targets call for."""
        if model_loss(out) is not None or y is None:
            return "model"
        if y.is_floating_point():
            return "mse"
        return "token-cross-entropy" if y.dim() >= 2 else "cross-entropy"


def _fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import is_fake

    return bool(is_fake(t))


def check_labels(classes: int, labels: torch.Tensor, origin: str) -> None:
    """Class labels lie in 0 … classes-1, or are IGNORE_INDEX (a label to skip)."""
    if labels.is_floating_point() or labels.is_complex() or labels.is_meta or _fake(labels):
        return  # meta and fake tensors (a traced estimate, a simulation) have no values
    labels = labels[labels != IGNORE_INDEX]
    if labels.numel() == 0:
        return
    low, high = int(labels.min()), int(labels.max())
    if high >= classes:
        raise DpwiseError(
            f"{origin}: labels reach {high} but the model outputs {classes} classes; labels must "
            f"lie in 0…{classes - 1}: give the model more outputs (e.g. --model-arg "
            f"classes={high + 1}) or fix the labels"
        )
    if low < 0:
        raise DpwiseError(
            f"{origin}: labels include {low}, but class labels must lie in 0…{classes - 1} "
            f"({IGNORE_INDEX} marks a label to ignore); fix the labels"
        )


def _cross_entropy(
    pred: torch.Tensor, y: torch.Tensor, token: bool, origin: str, check: torch.Tensor | None
) -> torch.Tensor:
    """Mean cross-entropy; ``check``: the labels to test against the classes (first batch)."""
    if y.is_floating_point():
        raise DpwiseError(
            f"{origin}: cross-entropy needs integer class labels, got {_dtype(y)} targets; "
            "use --loss mse for real-valued targets"
        )
    if y.dtype != torch.long:
        y = y.long()  # int32, uint8 or bool labels: F.cross_entropy takes int64
    if token:
        if pred.dim() != y.dim() + 1 or pred.shape[:-1] != y.shape:
            raise DpwiseError(
                f"{origin}: token-cross-entropy needs logits (batch, tokens, vocab) for labels "
                f"(batch, tokens); got logits {_shape(pred)} and labels {_shape(y)}"
            )
        pred, y = pred.reshape(-1, pred.shape[-1]).float(), y.reshape(-1)
    elif pred.dim() != 2 or y.dim() != 1 or pred.shape[0] != y.shape[0]:
        raise DpwiseError(
            f"{origin}: cross-entropy needs logits (batch, classes) and labels (batch,); got "
            f"logits {_shape(pred)} and labels {_shape(y)} (for sequences use --loss "
            "token-cross-entropy)"
        )
    if check is not None:
        check_labels(pred.shape[-1], check, origin)
    try:
        return F.cross_entropy(pred, y, ignore_index=IGNORE_INDEX)
    except IndexError:  # a later batch's label out of range (the CPU raises; CUDA asserts)
        check_labels(pred.shape[-1], y, origin)
        raise


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
