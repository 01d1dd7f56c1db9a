"""Non-finite losses: caught at the step they appear, explained in one line, never trained on
silently.

The loop hands every step's loss to a ``LossWatch``: one finiteness test of one number per step,
nothing else. Only when a loss is NaN or infinite does dpwise look further (the batch of that
step, the losses before it) to name the likely cause.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import torch

from dpwise.workload import batches
from dpwise.workload.batches import Inputs

Batch = tuple[Inputs, torch.Tensor | None]


@dataclass(frozen=True)
class Where:
    """The position of one optimizer step (every number 1-based)."""

    step: int  # global optimizer step
    epoch: int
    step_in_epoch: int


@dataclass(frozen=True)
class Divergence:
    """The first non-finite loss of a run and what most likely caused it."""

    value: str  # "nan", "inf" or "-inf"
    step: int
    epoch: int
    step_in_epoch: int
    last_finite_loss: float | None
    last_finite_step: int | None
    rank: int
    world_size: int
    cause: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """'the loss became nan at step 2 (epoch 1, step 2 of the epoch); the last finite …'"""
        whose = f"rank {self.rank}'s loss" if self.world_size > 1 else "the loss"
        last = (
            "no step had a finite loss"
            if self.last_finite_loss is None
            else f"the last finite loss was {self.last_finite_loss:.4g} (step "
            f"{self.last_finite_step})"
        )
        return (
            f"{whose} became {self.value} at step {self.step} (epoch {self.epoch}, step "
            f"{self.step_in_epoch} of the epoch); {last}; likely cause: {self.cause}"
        )

    def message(self) -> str:
        return f"{self.summary()}; training stopped and wrote no final.pt"


def nonfinite_rows(batch: Iterable[Batch]) -> tuple[int, int, str]:
    """(rows with a NaN or infinite input or float target, rows, the first bad value)."""
    bad, total, first = 0, 0, ""
    for x, y in batch:
        tensors = [t for t in _tensors(x) if t.is_floating_point()]
        if y is not None and y.is_floating_point():
            tensors.append(y)
        rows = batches.rows(x)
        mask = torch.zeros(rows, dtype=torch.bool)
        for t in tensors:
            wrong = ~torch.isfinite(t.detach().cpu().reshape(rows, -1))
            if not first and wrong.any():
                first = str(t.detach().cpu().reshape(-1)[wrong.reshape(-1)][0].item())
            mask |= wrong.any(dim=1)
        bad, total = bad + int(mask.sum()), total + rows
    return bad, total, first


def _tensors(x: Inputs) -> list[torch.Tensor]:
    return [x] if isinstance(x, torch.Tensor) else list(x.values())


def likely_cause(
    batch: Iterable[Batch],
    where: Where,
    grew: tuple[float, float] | None,
    lr: float,
    precision: str,
) -> str:
    """Why the loss went non-finite: the batch's own values, the learning rate, or the model."""
    bad, rows, value = nonfinite_rows(batch)
    if bad:
        return (
            f"non-finite inputs ({bad} of the {rows} rows of this step's batch hold {value}); "
            "clean the data (drop those rows or replace the values, e.g. torch.nan_to_num)"
        )
    if where.step == 1:
        return (
            "the model or its loss made a non-finite value from finite inputs before any update "
            "(the initial weights, or an operation such as log(0) or a division by 0)"
            + _precision_hint(precision)
        )
    growth = "" if grew is None else f", the loss grew from {grew[0]:.4g} to {grew[1]:.4g},"
    return (
        f"a learning rate too high (--lr {lr:g}): the inputs of this step are finite{growth} and "
        "the update before it made the loss non-finite; lower --lr" + _precision_hint(precision)
    )


def _precision_hint(precision: str) -> str:
    if precision == "fp16":
        return " (or --precision fp16 overflowed: try bf16 or fp32)"
    return ""


def divergence(
    value: float,
    where: Where,
    watch: LossWatch,
    batch: Iterable[Batch],
    config: Any,
    rank: int = 0,
    world_size: int = 1,
) -> Divergence:
    """The record of a run's first non-finite loss (``config``: its lr and precision)."""
    first, last = watch.first, watch.last
    grew = (first, last[1]) if first is not None and last is not None and last[1] > first else None
    return Divergence(
        value=str(value),
        step=where.step,
        epoch=where.epoch,
        step_in_epoch=where.step_in_epoch,
        last_finite_loss=None if last is None else last[1],
        last_finite_step=None if last is None else last[0],
        rank=rank,
        world_size=world_size,
        cause=likely_cause(batch, where, grew, config.lr, config.precision),
    )


Found = tuple[float, Where] | None  # a non-finite loss and where it appeared


class LossWatch:
    """Tests each step's loss for NaN and infinity (one number per step).

    On the CPU the loss is read at its step. On an accelerator it is read one step late, once the
    next step's work is queued, so reading it never leaves the device idle; ``flush`` reads the
    step still pending (before a checkpoint, at the end of an epoch). Both return the first
    non-finite loss and where it appeared, once; ``first`` and ``last`` hold the finite losses
    before it.
    """

    def __init__(self, device: torch.device) -> None:
        self.lag = device.type != "cpu"
        self.pending: tuple[torch.Tensor, Where] | None = None
        self.first: float | None = None  # the first finite loss seen
        self.last: tuple[int, float] | None = None  # (step, loss) of the last finite one
        self.tripped = False

    def remember(self, losses: list[float]) -> None:
        """The losses of the steps before this process started (a resumed run)."""
        steps = [(i + 1, v) for i, v in enumerate(losses) if math.isfinite(v)]
        if steps:
            self.first, self.last = steps[0][1], steps[-1]

    def see(self, loss: torch.Tensor, where: Where) -> Found:
        if self.tripped:
            return None
        if not self.lag:
            return self._check(loss, where)
        previous, self.pending = self.pending, (loss, where)
        return None if previous is None else self._check(*previous)

    def flush(self) -> Found:
        previous, self.pending = self.pending, None
        return None if previous is None or self.tripped else self._check(*previous)

    def _check(self, loss: torch.Tensor, where: Where) -> Found:
        value = loss.item()
        if math.isfinite(value):
            if self.first is None:
                self.first = value
            self.last = (where.step, value)
            return None
        self.tripped = True
        return value, where
