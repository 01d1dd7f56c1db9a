"""The Strategy interface: what differs between single, dp and ddp lives here, not in the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, TypeAlias, runtime_checkable

import torch
from torch import nn

from dpwise.launch.env import DistEnv
from dpwise.launch.settings import DEFAULT_TIMEOUT_S
from dpwise.strategies.traits import Traits

OptionValue: TypeAlias = bool | float | str | None
"""A strategy's own setting (a TrainConfig field its traits' ``options`` name): a switch, a size
(--bucket-cap-mb) or a choice (--comm-hook, --shard-units)."""


@dataclass(frozen=True, kw_only=True)
class StrategySpec:
    """What a strategy is built from (``from_spec``): the planner resolves it from the settings,
    the hardware and the launch environment, so that a strategy never reads either."""

    name: str
    device_type: str
    """"cpu" or "cuda"."""
    backend: str | None = None
    """The process group's backend (gloo, nccl); None where the strategy runs one process."""
    dp_devices: int = 0
    """GPUs one process splits each batch over (DataParallel's); 0: the process's one device."""
    timeout_s: float = DEFAULT_TIMEOUT_S
    """Seconds a collective waits for a peer (--timeout)."""
    options: Mapping[str, OptionValue] = field(default_factory=dict)
    """The settings only this strategy takes (its traits' ``options``), by name."""


@dataclass(frozen=True, kw_only=True)
class StrategyFacts:
    """What a strategy says of its run (``describe()``), for metrics.json and compare's runs."""

    devices: tuple[str, ...]
    """The devices its memory is measured on (its traits' ``devices``)."""
    backend: str | None
    """The process group's backend; None where there is no group."""
    notes: tuple[str, ...] = ()
    """Lines the run's output and results repeat (dp's CPU pass-through, fsdp's units)."""
    sharded_units: tuple[str, ...] | None = None
    """What a sharding strategy shards, in order (fsdp.unit_names); None where nothing is."""


@runtime_checkable
class Strategy(Protocol):
    traits: ClassVar[Traits]
    """What plan, config and compare ask instead of the name (declared once, on the class)."""
    name: str
    device: torch.device
    rank: int
    world_size: int
    """Processes that split each global batch (1 for single and dp)."""

    @classmethod
    def from_spec(cls, spec: StrategySpec, env: DistEnv) -> Strategy:
        """The strategy a resolved spec asks for (dpwise.strategies.make_strategy calls it)."""

    def setup(self) -> None:
        """Process group and device selection; a no-op where there is none."""

    def place(self, model: nn.Module) -> nn.Module:
        """Put a freshly built model where wrap() wants it (its device, for most)."""

    def wrap(self, model: nn.Module) -> nn.Module:
        """DataParallel(model) / DistributedDataParallel(model) / the model itself."""

    def unwrap(self, model: nn.Module) -> nn.Module:
        """The module whose state dict has no ``module.`` prefix."""

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        """The whole model's state dict without wrapper prefixes, as the plain model has it.
        Every process calls it (a sharded strategy gathers here); the main process's is whole."""

    def load_full_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        """Load a full_state_dict() into the wrapped model on every process."""

    def optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        """The whole optimizer state in the plain optimizer's layout (``optimizer.state_dict()``
        of the unwrapped model). Every process calls it; the main process's is whole."""

    def load_optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        """Load an optimizer_state_dict() on every process."""

    def hook_state_dict(self, model: nn.Module) -> list[dict[str, Any]] | None:
        """The state of what trains the model besides its parameters and optimizer (ddp's
        PowerSGD hook: its step, its generator, each process's error feedback), one entry per
        process in rank order; None where there is none. Every process calls it (it may
        gather); the main process's is whole."""

    def load_hook_state_dict(
        self, model: nn.Module, states: list[dict[str, Any]] | None, settle: Callable[[], None]
    ) -> None:
        """Load this process's part of a hook_state_dict() (ValueError where it does not fit),
        before the model's and optimizer's state. ``settle``: one forward and backward whose
        gradients are dropped, for a hook whose state is laid out by what the wrapper builds in
        its first backward (DDP's buckets)."""

    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        """The rows of one global batch that this process trains on."""

    def no_sync(self, model: nn.Module) -> AbstractContextManager[None]:
        """Skip gradient synchronisation (non-final accumulation micro-steps)."""

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        """Mean of a tensor over processes (the tensor itself where there is one process)."""

    def all_gather_object(self, obj: object) -> list[object]:
        """One object from every process, in rank order."""

    def synchronize(self) -> None:
        """Wait for queued device work before a clock is read."""

    @property
    def is_main(self) -> bool:
        """Rank 0: the only process that writes files or prints results."""

    def release(self, model: nn.Module) -> None:
        """Every process is done with a model wrap() returned: complete outstanding
        communication and free what holds the process group (DDP's Reducer) while the group is
        alive; a no-op where nothing does."""

    def teardown(self) -> None:
        """Free what wrap() built that still holds the process group, then the group itself;
        a no-op where there is none."""

    def describe(self) -> StrategyFacts:
        """Facts for metrics.json: devices, backend, notes."""


class NoHookState:
    """The hook-state methods of a strategy without a communication hook (single, dp, fsdp)."""

    def hook_state_dict(self, model: nn.Module) -> list[dict[str, Any]] | None:
        return None  # no communication hook: nothing beyond the model and the optimizer

    def load_hook_state_dict(
        self, model: nn.Module, states: list[dict[str, Any]] | None, settle: Callable[[], None]
    ) -> None:
        return None


class WholeModel(NoHookState):
    """The state hooks of a strategy whose every process holds the whole model (single, dp, ddp):
    the model goes to the process's device, and the state dicts are the unwrapped module's and
    the optimizer's own."""

    device: torch.device

    def unwrap(self, model: nn.Module) -> nn.Module:
        return model

    def place(self, model: nn.Module) -> nn.Module:
        return model.to(self.device)

    def full_state_dict(self, model: nn.Module) -> dict[str, torch.Tensor]:
        return self.unwrap(model).state_dict()  # every process holds the whole model

    def load_full_state_dict(self, model: nn.Module, state: dict[str, torch.Tensor]) -> None:
        self.unwrap(model).load_state_dict(state)

    def optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        return optimizer.state_dict()

    def load_optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        optimizer.load_state_dict(state)
