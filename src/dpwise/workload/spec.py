"""A workload = a model + a data set + a loss: built in, ``pkg.module:factory``, a library's
registry (``torchvision:``, ``timm:``, ``transformers:``) or synthetic data."""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import torch
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.workload import batches, misfit, models, synthetic, zoo
from dpwise.workload.batches import Inputs
from dpwise.workload.data import BatchSource
from dpwise.workload.objective import Objective


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


def _import_module(name: str) -> Any:
    """Import ``name``; a module in the current folder is found too, as with ``python -m``, but
    after the installed packages, so a local file never hides one (the workers inherit the path)."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != name.split(".")[0] or here in sys.path or "" in sys.path:
            raise
        sys.path.append(here)
        return importlib.import_module(name)


def load_factory(spec: str, flag: str) -> Callable[..., Any]:
    """Import ``pkg.module:factory``; every failure is one DpwiseError naming the spec."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        names = ", ".join(BUILTINS)
        raise DpwiseError(
            f"{flag} {spec!r} is neither a built-in ({names}), a library model "
            "(torchvision:NAME, timm:NAME, transformers:TYPE) nor pkg.module:factory"
        )
    try:
        module = _import_module(module_name)
    except SystemExit as exc:
        raise DpwiseError(
            f"{flag} {spec}: importing {module_name} called sys.exit({exc.code!r})"
        ) from None
    except Exception as exc:  # an import can fail in any way
        raise DpwiseError(
            f"{flag} {spec}: cannot import {module_name} ({type(exc).__name__}: {one_line(exc)})"
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
    except DpwiseError:
        raise  # already one line that names the spec
    except SystemExit as exc:  # exit code 3 and no word would leave the user guessing
        raise DpwiseError(
            f"{flag} {spec}: the factory called sys.exit({exc.code!r}) instead of returning"
        ) from None
    except Exception as exc:  # a user's factory can fail in any way
        raise DpwiseError(
            f"{flag} {spec}: the factory raised {type(exc).__name__}: {one_line(exc)}"
        ) from None


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first line of an exception's message (torch's can run to dozens of lines)."""
    lines = str(exc).strip().splitlines() or [""]
    text = lines[0] if len(lines) == 1 else f"{lines[0].rstrip()} …"
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


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
    data_factory: Callable[..., Any] | None  # None: synthetic data (given or inferred)
    loss_kind: str = "auto"

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

    def build_for_inspection(self) -> nn.Module:
        """The model for reading its structure: on the meta device (no memory), or on the CPU
        when its constructor cannot run there (e.g. it calls ``.item()`` on a tensor)."""
        try:
            with torch.device("meta"):
                return self.build_model()
        except DpwiseError as meta_failure:
            try:
                return self.build_model()
            except DpwiseError:
                raise meta_failure from None

    # -- running the model on a batch: the one place a forward and its loss are computed --------
    def objective(self) -> Objective:
        """A fresh loss for one process (``auto`` resolves on the first batch)."""
        return Objective(self.loss_kind, f"--model {self.model_spec}")

    def forward(self, model: nn.Module, x: Inputs) -> Any:
        return batches.call(model, x)

    def loss(
        self,
        model: nn.Module,
        x: Inputs,
        y: torch.Tensor | None,
        objective: Objective | None = None,
    ) -> torch.Tensor:
        """Forward and mean-reduced loss of one batch (what every training step computes).

        A model that fails on the first batch it sees (inputs that do not fit it) is a one-line
        error naming what it was given; later failures keep their traceback.
        """
        objective = objective or self.objective()
        if objective.seen_batch:
            return objective(batches.call(model, x), y)
        try:
            out = batches.call(model, x)
        except (RuntimeError, AssertionError, ValueError, TypeError, IndexError, KeyError) as exc:
            if not _misfit(exc):
                raise
            first = (str(exc).strip().splitlines() or [""])[0][:300].rstrip(".")
            why = misfit.hint(model, x)
            said = f"{type(exc).__name__}: {first}"
            raise DpwiseError(
                f"--model {self.model_spec} failed on the first batch (per sample: "
                f"{batches.describe(x)}): {said if why is None else f'{why} ({said})'}; check "
                "that the data fits the model (--data, --data-arg shape=…, --model-arg)"
            ) from exc
        loss = objective(out, y)
        objective.seen_batch = True
        return loss

    # -- data --------------------------------------------------------------------------------------
    @cached_property
    def synthetic_spec(self) -> synthetic.Spec | None:
        """The synthetic data's description, completed from the model (None for a factory)."""
        if self.data_factory is not None:
            return None
        given = synthetic.spec_from_args(self.data_args)
        if synthetic.is_complete(given):
            return given
        return synthetic.complete(given, self.build_for_inspection())

    def validate(self) -> Workload:
        """Fail now (one line) on what would fail in every worker: imports, uninferable data."""
        _ = self.synthetic_spec
        return self

    def data_description(self) -> str:
        if self.data_spec in BUILTINS:
            return BUILTINS[self.data_spec].summary
        spec = self.synthetic_spec
        return f"--data {self.data_spec}" if spec is None else synthetic.describe(spec)

    def load_data(self, seed: int) -> BatchSource:
        spec = self.synthetic_spec  # None: a factory gives the data
        if spec is not None:
            return BatchSource(synthetic.generate(spec, seed), "--data synthetic")
        assert self.data_factory is not None
        kwargs = dict(self.data_args)
        if self.data_spec in BUILTINS:
            kwargs = {**self.model_args, **kwargs}
        if _accepts(self.data_factory, "seed"):
            kwargs.setdefault("seed", seed)
        data = _call(self.data_factory, self.data_spec, "--data", kwargs)
        return BatchSource(data, f"--data {self.data_spec}")


def _misfit(exc: BaseException) -> bool:
    """An error that says the inputs do not fit the model, not a resource or network failure."""
    resource_errors = tuple(
        t
        for t in (
            getattr(torch, "OutOfMemoryError", None),
            getattr(torch.cuda, "OutOfMemoryError", None),
            getattr(getattr(torch, "distributed", None), "DistBackendError", None),
        )
        if isinstance(t, type)
    )
    if isinstance(exc, resource_errors):
        return False
    text = str(exc).lower()
    return not any(word in text for word in ("out of memory", "nccl", "gloo", "cuda error"))


def model_factory(model: str) -> Callable[..., nn.Module]:
    if model in BUILTINS:
        return BUILTINS[model].model
    if zoo.is_shortcut(model):
        return zoo.factory(model)
    return load_factory(model, "--model")


def workload_for(cfg: Any) -> Workload:
    """The workload of a train or compare config (model, data and loss settings)."""
    return resolve_workload(cfg.model, cfg.model_args, cfg.data, cfg.data_args, cfg.loss)


def resolve_workload(
    model: str,
    model_args: dict[str, Any],
    data: str | None,
    data_args: dict[str, Any],
    loss: str = "auto",
) -> Workload:
    """Without --data: a built-in model's own data set, else synthetic data inferred from it."""
    build = model_factory(model)  # the model's import fails first
    data_spec = data or (model if model in BUILTINS else synthetic.NAME)
    if data_spec == synthetic.NAME:
        data_factory = None
    elif data_spec in BUILTINS:
        data_factory = BUILTINS[data_spec].data
    else:
        data_factory = load_factory(data_spec, "--data")
    Objective(loss, model)  # an unknown --loss fails here, before anything runs
    return Workload(model, model_args, data_spec, data_args, build, data_factory, loss)
