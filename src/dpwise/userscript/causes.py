"""What in a verified script's model can make the original and the migrated runs differ, found
inside the run by `dpwise.userscript.harness` (the same findings `dpwise compare` names):

- BatchNorm layers in training mode (not SyncBatchNorm): each process normalises with the
  statistics of its own share of the global batch;
- random layers: the modules that drew from a global random generator during one training
  forward (Dropout, DropPath, a functional dropout, noise), each process drawing its own numbers
  for its own rows. Where no forward could be watched (a run of one step, a model on a GPU),
  Dropout by class.

Watching reads the random generators and digests activations; it changes nothing the script
computes.
"""

from __future__ import annotations

import gc
import warnings
from typing import Any, Literal, TypedDict

from torch import nn

from dpwise.diagnosis.calls import CallRecorder, release_weights
from dpwise.diagnosis.layers import (
    Layer,
    LayerDict,
    batchnorm_layers,
    dropout_layers,
    layers_of,
)
from dpwise.diagnosis.stochastic import stochastic_modules

FoundBy = Literal["running", "class"]
BY_RUNNING: FoundBy = "running"  # random layers found by watching a training forward
BY_CLASS: FoundBy = "class"  # ... by class name only


class Causes(TypedDict):
    """What `Watch.causes` found, saved by the harness beside the parameters (`torch.save`,
    read back by `verify`)."""

    batchnorm: list[LayerDict]
    stochastic: list[LayerDict]
    found_by: FoundBy
    models: list[str]  # the classes of the models the optimizer trains


def _unwrap(module: nn.Module) -> nn.Module:
    """The model inside DataParallel / DistributedDataParallel (and wrappers like them)."""
    inner = getattr(module, "module", None)
    while isinstance(inner, nn.Module):
        module, inner = inner, getattr(inner, "module", None)
    return module


def owning_models(optimizer: Any) -> list[nn.Module]:
    """The outermost modules that hold the optimizer's first parameter, unwrapped."""
    first = next((p for g in optimizer.param_groups for p in g["params"]), None)
    if first is None:
        return []
    with warnings.catch_warnings():  # isinstance on some of torch's lazy objects warns
        warnings.simplefilter("ignore")
        modules = [obj for obj in gc.get_objects() if _is_module(obj)]
    holders = [m for m in modules if any(p is first for p in m.parameters())]
    inner = {id(m) for h in holders for m in h.modules() if m is not h}
    models: dict[int, nn.Module] = {}
    for holder in holders:
        if id(holder) not in inner:
            model = _unwrap(holder)
            models[id(model)] = model
    return list(models.values())


def _is_module(obj: object) -> bool:
    """isinstance, where a weak proxy whose object is gone (the garbage collector still lists
    it) is no module rather than a ReferenceError."""
    try:
        return isinstance(obj, nn.Module)
    except ReferenceError:
        return False


def _training_batchnorm(model: nn.Module) -> list[Layer]:
    modules = dict(model.named_modules())
    return [
        layer
        for layer in batchnorm_layers(model)
        if modules[layer.name].training and not isinstance(modules[layer.name], nn.SyncBatchNorm)
    ]


class Watch:
    """Finds the optimizer's model at its first step and watches the training forwards until
    the next step; ``causes`` then says what in the model can make parallel runs differ."""

    def __init__(self) -> None:
        self.models: list[nn.Module] = []
        self._recorders: list[CallRecorder] = []
        self._watched = False

    def start(self, optimizer: Any) -> None:
        self.models = owning_models(optimizer)
        self._recorders = [CallRecorder(m) for m in self.models]
        # the watch reads the CPU's generators, and DataParallel's threads on several GPUs would
        # interleave the calls: a model off the CPU keeps the layer classes
        if all(p.device.type == "cpu" for m in self.models for p in m.parameters()):
            for recorder in self._recorders:
                recorder.__enter__()

    def stop(self) -> None:
        for recorder in self._recorders:
            if recorder._handles:
                recorder.__exit__(None, None, None)
                self._watched = self._watched or bool(recorder.calls)
        release_weights()

    def causes(self) -> Causes:
        self.stop()
        batchnorm: list[Layer] = []
        stochastic: list[Layer] = []
        for model, recorder in zip(self.models, self._recorders, strict=True):
            batchnorm += _training_batchnorm(model)
            if self._watched:
                stochastic += layers_of(model, stochastic_modules([recorder.calls]))
            else:
                stochastic += dropout_layers(model)
        return {
            "batchnorm": [layer.to_dict() for layer in batchnorm],
            "stochastic": [layer.to_dict() for layer in stochastic],
            "found_by": BY_RUNNING if self._watched else BY_CLASS,
            "models": [type(m).__name__ for m in self.models],
        }
