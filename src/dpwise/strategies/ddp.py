"""DistributedDataParallel: a process per device; gradient buckets all-reduced in backward."""

from __future__ import annotations

import gc
import inspect
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpwise.errors import DpwiseError
from dpwise.launch.env import DistEnv
from dpwise.launch.settings import DEFAULT_TIMEOUT_S
from dpwise.strategies.base import WholeModel
from dpwise.strategies.ddp_guard import GuardedDDP
from dpwise.strategies.powersgd import PowerSGD, powersgd
from dpwise.strategies.traits import OWN, Traits

if TYPE_CHECKING:
    from dpwise.strategies.base import StrategySpec

# Workers reach init_process_group seconds apart (imports, data, a loaded machine): the first
# meeting may wait this long even when --timeout is shorter; --timeout applies from then on.
STARTUP_TIMEOUT_S = DEFAULT_TIMEOUT_S


def _accepts_device_id() -> bool:
    return "device_id" in inspect.signature(dist.init_process_group).parameters


def check_comm_hook(name: str, backend: str, find_unused: bool = False) -> None:
    """A hook the backend cannot run is one line before anything starts."""
    if name == "bf16" and backend != "nccl":
        raise DpwiseError(
            "--comm-hook bf16 needs NCCL (torch's bf16_compress_hook: CUDA 11+ and NCCL 2.10+); "
            f"this run's backend is {backend}: use --comm-hook fp16"
        )
    if name == "powersgd" and backend == "gloo" and find_unused:
        raise DpwiseError(
            "--comm-hook powersgd on gloo cannot take --find-unused-parameters: DDP's all-reduce "
            "of which parameters were used races PowerSGD's second all-reduce, started from a "
            'callback, and gloo aborts ("Received data size doesn\'t match expected size", '
            "in every run tried); drop one of them"
        )


def one_bucket_mb(gradient_bytes: int) -> float:
    """A bucket size (MB) that holds ``gradient_bytes`` of gradients in one bucket."""
    return float(int(gradient_bytes / 2**20) + 1)


def powersgd_bucket(hook: str, backend: str, model: nn.Module, given: float | None) -> float | None:
    """PowerSGD on gloo in one bucket: its hook starts a second all-reduce from a future's
    callback while DDP starts the next bucket's from backward, and gloo needs every process to
    start collectives in the same order; with several buckets the two race ("Received data size
    doesn't match expected size": GPT-2 with 2 layers, every run; PyTorch's own PowerSGD parity
    test fails on gloo, pytorch#58467). The size to use (None: leave DDP's), or DpwiseError
    where --bucket-cap-mb splits the gradients."""
    if hook != "powersgd" or backend != "gloo":
        return given
    need = one_bucket_mb(
        sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    )
    if given is None:
        return need
    if given < need:
        raise DpwiseError(
            f"--comm-hook powersgd on gloo needs every gradient in one bucket (its second "
            f"all-reduce races the next bucket's otherwise, and gloo aborts): --bucket-cap-mb "
            f"{given:g} splits this model's gradients; give --bucket-cap-mb {need:g} or more, or "
            "drop it"
        )
    return given


def comm_hook(
    name: str, backend: str, model: nn.Module, find_unused: bool = False
) -> tuple[Any, Callable[..., Any]]:
    """(state, hook) of one of DDP's communication hooks for ``model``, for register_comm_hook:
    fp16 and bf16 keep no state; PowerSGD's (strategies.powersgd) is checkpointed."""
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    check_comm_hook(name, backend, find_unused)
    if name == "fp16":
        return None, default_hooks.fp16_compress_hook
    if name == "bf16":
        return None, default_hooks.bf16_compress_hook
    # PowerSGD: rank-1 approximations with error feedback, after two plain all-reduce steps
    return PowerSGD(model), powersgd


class DDPStrategy(WholeModel):
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
    )
    name = traits.name

    @classmethod
    def refuses(cls, model: nn.Module, device_type: str, varying: str = "") -> str | None:
        """Why this strategy cannot run ``model`` on ``device_type`` (before any process starts),
        or None: SyncBatchNorm synchronises through CUDA only. ``varying``: the layers whose
        parameters the model uses in some steps only (DDP handles them with
        find_unused_parameters)."""
        if device_type == "cuda":
            return None
        synced = [
            n or "the model" for n, m in model.named_modules() if isinstance(m, nn.SyncBatchNorm)
        ]
        if not synced:
            return None
        return (
            f"--strategy {cls.traits.name} on the CPU: the model has SyncBatchNorm layers "
            f"({', '.join(synced[:3])}{', …' if len(synced) > 3 else ''}), which PyTorch runs "
            "only on GPUs; on the CPU use nn.BatchNorm layers (or single/dp), or run on GPUs"
        )

    def __init__(
        self,
        env: DistEnv,
        backend: str,
        device_type: str,
        comm_hook: Callable[..., Any] | None = None,
        timeout_s: float | None = None,
        options: dict[str, bool] | None = None,
    ) -> None:
        self.env = env
        self.backend = backend
        self.rank = env.rank
        self.world_size = env.world_size
        if device_type == "cuda":
            self.device = torch.device("cuda", env.device_index)
        else:
            self.device = torch.device("cpu")
        options = dict(options or {})
        self.comm_hook = comm_hook
        self.hook_name = str(options.pop("comm_hook", None) or "none")
        self.settings = dict(options)  # every option as given (defaults included)
        # what DistributedDataParallel takes: find_unused_parameters, static_graph,
        # bucket_cap_mb, gradient_as_bucket_view (left to DDP's defaults where not given)
        ddp_kwargs = ("find_unused_parameters", "static_graph", "bucket_cap_mb",
                      "gradient_as_bucket_view")  # fmt: skip
        self.options = {k: v for k, v in options.items() if v and k in ddp_kwargs}
        self.timeout = timedelta(seconds=DEFAULT_TIMEOUT_S if timeout_s is None else timeout_s)
        self._owns_group = False
        self._wrapped: list[weakref.ref[nn.Module]] = []
        self._hook_states: weakref.WeakKeyDictionary[nn.Module, PowerSGD] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_spec(cls, spec: StrategySpec, env: DistEnv) -> DDPStrategy:
        return cls(
            env,
            spec.backend or "gloo",
            spec.device_type,
            timeout_s=spec.timeout_s,
            options=dict(spec.options),
        )

    def setup(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)  # before any CUDA tensor or NCCL communicator
        if not dist.is_initialized():
            setter = _timeout_setter()
            startup = self.timeout
            if setter is not None:
                startup = max(self.timeout, timedelta(seconds=STARTUP_TIMEOUT_S))
            kwargs: dict[str, Any] = {"backend": self.backend, "timeout": startup}
            if self.device.type == "cuda" and _accepts_device_id():
                kwargs["device_id"] = self.device  # binds NCCL to this rank's GPU up front
            dist.init_process_group(**kwargs)
            self._owns_group = True
            if startup != self.timeout:
                setter(self.timeout)  # collectives wait at most --timeout from now on
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def wrap(self, model: nn.Module) -> nn.Module:
        device_ids = [self.device.index] if self.device.type == "cuda" else None
        options = dict(self.options)
        cap = powersgd_bucket(self.hook_name, self.backend, model, options.get("bucket_cap_mb"))
        if cap is not None:
            options["bucket_cap_mb"] = cap
        wrapped = GuardedDDP(model, device_ids=device_ids, **options)
        if self.comm_hook is not None:
            wrapped.register_comm_hook(None, self.comm_hook)
        elif self.hook_name != "none":
            unused = bool(self.settings.get("find_unused_parameters"))
            state, hook = comm_hook(self.hook_name, self.backend, model, unused)
            wrapped.register_comm_hook(state, hook)
            if state is not None:
                self._hook_states[wrapped] = state
        self._wrapped.append(weakref.ref(wrapped))
        return wrapped

    def unwrap(self, model: nn.Module) -> nn.Module:
        return model.module if isinstance(model, DistributedDataParallel) else model

    def shard(self, rows: torch.Tensor) -> torch.Tensor:
        return rows[self.rank :: self.world_size]  # DistributedSampler: rank r takes r::W

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

    def hook_state_dict(self, model: nn.Module) -> list[dict[str, Any]] | None:
        """PowerSGD's state of every process, in rank order (each has its own error feedback;
        every rank calls it, it gathers); None where the model's hook keeps none."""
        state = self._hook_states.get(model)
        if state is None:
            return None
        return self.all_gather_object(state.state_dict())  # type: ignore[return-value]

    def load_hook_state_dict(
        self, model: nn.Module, states: list[dict[str, Any]] | None, settle: Callable[[], None]
    ) -> None:
        """This process's part of a hook_state_dict(), into the model's hook. DDP lays out its
        buckets after its first backward, in the order gradients became ready; the run that
        wrote ``states`` compressed in that layout, so a first backward (``settle``) comes first:
        the resumed run's first step runs in it too (the same sums, bit for bit)."""
        state = self._hook_states.get(model)
        if state is None:
            return
        if states is None:
            raise ValueError("it holds no PowerSGD state (--comm-hook powersgd)")
        if len(states) != self.world_size:
            raise ValueError(
                f"it holds the PowerSGD error feedback of {len(states)} processes, this run has "
                f"{self.world_size}: resume it on {len(states)} processes (--nproc × --nnodes)"
            )
        settle()
        state.load_state_dict(states[self.rank])

    def no_sync(self, model: nn.Module) -> AbstractContextManager[None]:
        return model.no_sync() if isinstance(model, DistributedDataParallel) else nullcontext()

    def all_reduce_mean(self, tensor: torch.Tensor) -> torch.Tensor:
        reduced = tensor.detach().clone()
        dist.all_reduce(reduced, op=dist.ReduceOp.SUM)
        return reduced / self.world_size

    def all_gather_object(self, obj: object) -> list[object]:
        gathered: list[object] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def synchronize(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def release(self, model: nn.Module) -> None:
        """Every rank is done with ``model``: finish outstanding work, detach what holds the group.

        The barrier completes every collective this rank queued (its async work objects); the
        Reducer (which holds the process group) is then dropped while the group is still alive.
        """
        if dist.is_initialized():
            dist.barrier()
        _detach_reducer(model)

    def teardown(self) -> None:
        """Free the DDP wrappers' Reducers, then destroy the process group (in that order).

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
        if self._owns_group and dist.is_initialized():
            dist.destroy_process_group()
            self._owns_group = False

    def memory_devices(self) -> list[torch.device]:
        return [self.device]

    def describe(self) -> dict[str, object]:
        return {"devices": [str(self.device)], "backend": self.backend, "notes": []}


def _timeout_setter() -> Callable[[timedelta], None] | None:
    """What changes the default group's timeout after init (None where torch has nothing)."""
    public = getattr(dist, "set_timeout", None)  # newer torch; the private one warns there
    return public or getattr(dist.distributed_c10d, "_set_pg_timeout", None)


def _detach_reducer(model: nn.Module) -> None:
    """Drop a DDP wrapper's C++ Reducer and the Logger that shares it (both hold the group)."""
    if isinstance(model, DistributedDataParallel):
        for name in ("logger", "reducer"):
            if name in model.__dict__:
                setattr(model, name, None)
