"""Why a batch does not fit a model, in words: read off the model's first layer and weights.

Used only after the model failed on its first batch, so nothing here runs in training.
"""

from __future__ import annotations

import torch
from torch import nn

from dpwise.workload.batches import Inputs

_FIRST_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.Embedding)


def _first_layer(model: nn.Module) -> tuple[str, nn.Module] | None:
    """The first module (in registration order) that holds parameters of its own."""
    for name, module in model.named_modules():
        if any(True for _ in module.parameters(recurse=False)):
            return name.removeprefix("module."), module  # DDP and DataParallel wrap as .module
    return None


def _dtype_hint(model: nn.Module, x: torch.Tensor) -> str | None:
    weights = next((p.dtype for p in model.parameters() if p.is_floating_point()), None)
    if weights is None or not x.is_floating_point() or x.dtype == weights:
        return None
    got, want = _name(x.dtype), _name(weights)
    return (
        f"the inputs are {got} but the model's weights are {want}: convert the inputs in the "
        f"data factory (e.g. x.to(torch.{want}))"
    )


def _shape_hint(name: str, layer: nn.Module, x: torch.Tensor) -> str | None:
    where = f"its first layer ({name or 'the model'}: {type(layer).__name__})"
    if isinstance(layer, nn.Linear) and x.dim() >= 2 and x.shape[-1] != layer.in_features:
        return (
            f"the inputs have {x.shape[-1]} features per sample but {where} takes "
            f"{layer.in_features}"
        )
    conv = isinstance(layer, (nn.Conv1d, nn.Conv2d, nn.Conv3d))
    if conv and x.dim() >= 2 and x.shape[1] != layer.in_channels:
        return (
            f"the inputs have {x.shape[1]} channels (dimension 1 of {tuple(x.shape)}) but "
            f"{where} takes {layer.in_channels}"
        )
    if isinstance(layer, nn.Embedding) and x.is_floating_point():
        return f"the inputs are {_name(x.dtype)} but {where} needs integer token ids"
    return None


def hint(model: nn.Module, x: Inputs) -> str | None:
    """One sentence on what does not fit (dtype or size of the first layer), or None."""
    if not isinstance(x, torch.Tensor):
        return None
    if x.dim() == 1:
        return (
            "each sample is a single number: the data's items are plain numbers, not "
            "(inputs, target) pairs of tensors"
        )
    first = _first_layer(model)
    if first is not None and isinstance(first[1], _FIRST_LAYERS):
        found = _shape_hint(first[0], first[1], x)
        if found is not None:
            return found
    return _dtype_hint(model, x)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
