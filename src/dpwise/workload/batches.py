"""Model inputs: one tensor, or a dict of tensors (``input_ids``, ``attention_mask``, …).

Every place that slices, moves or feeds a batch goes through these few functions, so a dict input
works in the loop, the probes and the estimate alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

Inputs = torch.Tensor | dict[str, torch.Tensor]


def is_inputs(value: object) -> bool:
    """A tensor, or a non-empty mapping of names to tensors."""
    if isinstance(value, torch.Tensor):
        return True
    return (
        isinstance(value, Mapping)
        and bool(value)
        and all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in value.items())
    )


def apply(fn: Callable[[torch.Tensor], torch.Tensor], x: Inputs) -> Inputs:
    if isinstance(x, torch.Tensor):
        return fn(x)
    return {k: fn(v) for k, v in x.items()}


def take(x: Inputs, rows: torch.Tensor) -> Inputs:
    """The given rows (first dimension) of every tensor."""
    return apply(lambda t: t.index_select(0, rows), x)


def to_device(x: Inputs, device: torch.device) -> Inputs:
    return apply(lambda t: t.to(device, non_blocking=True), x)


def rows(x: Inputs) -> int:
    if isinstance(x, torch.Tensor):
        return x.shape[0]
    return next(iter(x.values())).shape[0]


def row_counts(x: Inputs) -> dict[str, int]:
    if isinstance(x, torch.Tensor):
        return {"inputs": x.shape[0]}
    return {k: v.shape[0] for k, v in x.items()}


def call(model: nn.Module, x: Inputs) -> Any:
    """``model(x)`` for a tensor, ``model(**x)`` for a dict (as transformers models take it)."""
    if isinstance(x, torch.Tensor):
        return model(x)
    return model(**x)


def describe(x: Inputs) -> str:
    """'3×224×224 float32' or 'input_ids 64 int64, attention_mask 64 int64' (per sample)."""

    def one(t: torch.Tensor) -> str:
        shape = "×".join(str(d) for d in t.shape[1:]) or "scalar"
        return f"{shape} {str(t.dtype).removeprefix('torch.')}"

    if isinstance(x, torch.Tensor):
        return one(x)
    return ", ".join(f"{k} {one(v)}" for k, v in x.items())
