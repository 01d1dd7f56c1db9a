"""DistributedDataParallel: a process per device; gradient buckets all-reduced in backward."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from typing import Any, TypedDict

import torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpwise.launch.env import DistEnv
from dpwise.strategies.base import OptionValue, WholeModel
from dpwise.strategies.ddp_guard import GuardedDDP
from dpwise.strategies.hooks import CommHooks, HookState
from dpwise.strategies.process_group import ProcessGroupStrategy
from dpwise.strategies.traits import OWN, Traits


class DDPKwargs(TypedDict, total=False):
    """What DistributedDataParallel is given (each left to DDP's default where not set)."""

    find_unused_parameters: bool
    static_graph: bool
    bucket_cap_mb: float
    gradient_as_bucket_view: bool


def ddp_kwargs(settings: Mapping[str, OptionValue]) -> DDPKwargs:
    """The options DistributedDataParallel takes, those set (a false or missing one is DDP's
    default)."""
    kwargs = DDPKwargs()
    if settings.get("find_unused_parameters"):
        kwargs["find_unused_parameters"] = True
    if settings.get("static_graph"):
        kwargs["static_graph"] = True
    if settings.get("gradient_as_bucket_view"):
        kwargs["gradient_as_bucket_view"] = True
    cap = settings.get("bucket_cap_mb")
    if cap:
        kwargs["bucket_cap_mb"] = float(cap)
    return kwargs


class DDPStrategy(WholeModel, ProcessGroupStrategy):
    """The process group's (ProcessGroupStrategy); a whole replica per process, wrapped in DDP,
    with its communication hook (strategies.hooks)."""

    traits = Traits(
        name="ddp",
        summary="DistributedDataParallel: a process per device, gradients all-reduced",
        multiprocess=True,
        process_group=True,
        devices=OWN,
        options=(
            "find_unused_parameters",
            "static_graph",
            "bucket_cap_mb",
            "gradient_as_bucket_view",
            "comm_hook",
            "zero1",
        ),
        shards_optimizer="zero1",
    )
    name = traits.name

    def __init__(
        self,
        env: DistEnv,
        backend: str,
        device_type: str,
        comm_hook: Callable[..., Any] | None = None,
        *,
        timeout_s: float | None = None,
        options: Mapping[str, OptionValue] | None = None,
    ) -> None:
        """``comm_hook``: a hook registered as it is instead of --comm-hook's (a test's counter)."""
        self._given_hook = comm_hook
        super().__init__(env, backend, device_type, timeout_s=timeout_s, options=options)

    def _configure(self) -> None:
        self.options = ddp_kwargs(self.settings)
        unused = bool(self.settings.get("find_unused_parameters"))
        name = str(self.settings.get("comm_hook") or "none")
        self.hooks = CommHooks(name, self.backend, unused, self._given_hook)
        self._wrapped: list[weakref.ref[nn.Module]] = []

    def wrap(self, model: nn.Module) -> nn.Module:
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        kwargs = DDPKwargs(**self.options)
        cap = self.hooks.bucket_cap_mb(model, kwargs.get("bucket_cap_mb"))
        if cap is not None:
            kwargs["bucket_cap_mb"] = cap
        wrapped = GuardedDDP(model, device_ids=device_ids, **kwargs)
        self.hooks.register(wrapped, model)
        self._wrapped.append(weakref.ref(wrapped))
        return wrapped

    def unwrap(self, model: nn.Module) -> nn.Module:
        return model.module if isinstance(model, DistributedDataParallel) else model

    def no_sync(self, model: nn.Module) -> AbstractContextManager[None]:
        return model.no_sync() if isinstance(model, DistributedDataParallel) else nullcontext()

    def optimizer_state_dict(
        self, model: nn.Module, optimizer: torch.optim.Optimizer
    ) -> dict[str, Any]:
        """ZeRO-1's state is spread over the processes: gathered on rank 0 first (every rank
        calls it); a plain optimizer's is whole on every rank."""
        from torch.distributed.optim import ZeroRedundancyOptimizer

        if isinstance(optimizer, ZeroRedundancyOptimizer):
            optimizer.consolidate_state_dict(to=0)
            return optimizer.state_dict() if self.is_main else {}
        return optimizer.state_dict()

    def hook_state_dict(self, model: nn.Module) -> list[HookState] | None:
        """PowerSGD's state of every process, in rank order (every rank calls it, it gathers);
        None where the model's hook keeps none."""
        return self.hooks.state_dict(model, self.all_gather_object)

    def load_hook_state_dict(
        self, model: nn.Module, states: list[HookState] | None, settle: Callable[[], None]
    ) -> None:
        """This process's part of a hook_state_dict(), into the model's hook (after one
        backward, ``settle``: CommHooks.load_state_dict says why)."""
        self.hooks.load_state_dict(model, states, (self.rank, self.world_size), settle)

    def _let_go(self, model: nn.Module) -> None:
        _detach_reducer(model)

    def _let_go_of_all(self) -> None:
        """Free the DDP wrappers' Reducers before the group is destroyed.

        A Reducer's destructor runs with the GIL held (pybind11 binds it without releasing the
        GIL; the process group's own binding releases it: pytorch#56297, pytorch#56381). If a
        wrapper outlives destroy_process_group, its Reducer drops the last reference to
        ProcessGroupGloo, whose destructor joins gloo's threads with the GIL held while a gloo
        thread finishing an all_gather wants the GIL to free the work's tensors: a deadlock.
        So wrappers are collected (or, if something still holds one, their Reducer detached)
        while the group lives, and the group's last reference goes through its own binding.
        """
        gc.collect()  # wrappers in reference cycles die now, while the group is alive
        for ref in self._wrapped:
            wrapper = ref()
            if wrapper is not None:
                _detach_reducer(wrapper)
        self._wrapped.clear()


def _detach_reducer(model: nn.Module) -> None:
    """Drop a DDP wrapper's C++ Reducer and the Logger that shares it (both hold the group)."""
    if isinstance(model, DistributedDataParallel):
        for name in ("logger", "reducer"):
            if name in model.__dict__:
                setattr(model, name, None)
