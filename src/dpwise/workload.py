"""A workload = a model factory + a data set, built in or loaded from ``pkg.module:factory``."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from dpwise import models
from dpwise.data import BatchSource
from dpwise.errors import DpwiseError


@dataclass(frozen=True)
class Builtin:
    model: Callable[..., nn.Module]
    data: Callable[..., Any]
    summary: str


BUILTINS: dict[str, Builtin] = {
    "simple": Builtin(
        models.SimpleModel,
        models.simple_data,
        "the guide's SimpleModel (Linear 1000→512, ReLU, Linear 512→10) on 10,000 × 1000 inputs",
    ),
    "cnn": Builtin(
        models.SmallCNN, models.image_data, "a small CNN with BatchNorm on 2,048 3×32×32 images"
    ),
    "transformer": Builtin(
        models.TinyTransformer,
        models.token_data,
        "a tiny transformer encoder classifier on 2,048 sequences of 32 tokens",
    ),
}


def load_factory(spec: str, flag: str) -> Callable[..., Any]:
    """Import ``pkg.module:factory``; every failure is one DpwiseError naming the spec."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        names = ", ".join(BUILTINS)
        raise DpwiseError(f"{flag} {spec!r} is neither a built-in ({names}) nor pkg.module:factory")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # an import can fail in any way
        raise DpwiseError(
            f"{flag} {spec}: cannot import {module_name} ({type(exc).__name__}: {exc})"
        ) from None
    target: Any = module
    for part in attr.split("."):
        target = getattr(target, part, None)
        if target is None:
            raise DpwiseError(f"{flag} {spec}: {module_name} has no attribute {attr!r}")
    if not callable(target):
        raise DpwiseError(f"{flag} {spec}: {attr} is a {type(target).__name__}, not callable")
    return target


def _call(factory: Callable[..., Any], spec: str, flag: str, kwargs: dict[str, Any]) -> Any:
    try:
        return factory(**kwargs)
    except Exception as exc:  # a user's factory can fail in any way
        raise DpwiseError(
            f"{flag} {spec}: the factory raised {type(exc).__name__}: {exc}"
        ) from None


def _accepts(factory: Callable[..., Any], name: str) -> bool:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


@dataclass(frozen=True)
class Workload:
    model_spec: str
    model_args: dict[str, Any]
    data_spec: str
    data_args: dict[str, Any]
    model_factory: Callable[..., nn.Module]
    data_factory: Callable[..., Any]

    def build_model(self) -> nn.Module:
        model = _call(self.model_factory, self.model_spec, "--model", self.model_args)
        if not isinstance(model, nn.Module):
            raise DpwiseError(
                f"--model {self.model_spec}: the factory returned {type(model).__name__}, "
                "expected a torch.nn.Module"
            )
        if not any(p.requires_grad for p in model.parameters()):
            raise DpwiseError(
                f"--model {self.model_spec}: the model has no trainable parameters; "
                "there is nothing to train or to synchronise"
            )
        return model

    def check_output(self, out: object) -> torch.Tensor:
        """dpwise trains with cross-entropy on the model's output: it must be one tensor."""
        if not isinstance(out, torch.Tensor):
            raise DpwiseError(
                f"--model {self.model_spec}: forward returned {type(out).__name__}; dpwise needs "
                "the logits as one tensor (wrap the model so forward returns them)"
            )
        return out

    def load_data(self, seed: int) -> BatchSource:
        kwargs = dict(self.data_args)
        if self.data_spec in BUILTINS:
            kwargs = {**self.model_args, **kwargs}
        if _accepts(self.data_factory, "seed"):
            kwargs.setdefault("seed", seed)
        data = _call(self.data_factory, self.data_spec, "--data", kwargs)
        return BatchSource(data, f"--data {self.data_spec}")


def resolve_workload(
    model: str, model_args: dict[str, Any], data: str | None, data_args: dict[str, Any]
) -> Workload:
    data_spec = data or model
    model_factory = BUILTINS[model].model if model in BUILTINS else load_factory(model, "--model")
    data_factory = (
        BUILTINS[data_spec].data if data_spec in BUILTINS else load_factory(data_spec, "--data")
    )
    return Workload(model, model_args, data_spec, data_args, model_factory, data_factory)
