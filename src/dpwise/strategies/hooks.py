"""DDP's communication hooks (--comm-hook): which one a backend can run, how it is registered on
a wrapper, the one-bucket rule PowerSGD needs on gloo, and the glue that checkpoints a hook's
state (PowerSGD's own state is strategies.powersgd's)."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from torch import nn

from dpwise.errors import DpwiseError
from dpwise.strategies.powersgd import PowerSGD, powersgd

if TYPE_CHECKING:
    from torch.nn.parallel import DistributedDataParallel

HookState = dict[str, Any]
"""One process's hook state (PowerSGD.state_dict(): a torch state dict, tensors and numbers)."""


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
) -> tuple[PowerSGD | None, Callable[..., Any]]:
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


class CommHooks:
    """The hook one DDP strategy registers on each wrapper it builds, and the state each keeps
    (by wrapper: a wrapper that dies takes its state with it)."""

    def __init__(
        self,
        name: str,
        backend: str,
        find_unused: bool,
        given: Callable[..., Any] | None = None,
    ) -> None:
        self.name = name  # "none", "fp16", "bf16" or "powersgd"
        self.given = given  # a hook registered as it is, stateless, instead of name's
        self.backend = backend
        self.find_unused = find_unused
        self._states: weakref.WeakKeyDictionary[nn.Module, PowerSGD] = weakref.WeakKeyDictionary()

    def bucket_cap_mb(self, model: nn.Module, given: float | None) -> float | None:
        """The bucket size DDP is given for ``model`` (powersgd_bucket's rule)."""
        return powersgd_bucket(self.name, self.backend, model, given)

    def register(self, wrapped: DistributedDataParallel, model: nn.Module) -> None:
        """Register this strategy's hook (if any) on a wrapper of ``model``."""
        if self.given is not None:
            wrapped.register_comm_hook(None, self.given)
            return
        if self.name == "none":
            return
        state, hook = comm_hook(self.name, self.backend, model, self.find_unused)
        wrapped.register_comm_hook(state, hook)
        if state is not None:
            self._states[wrapped] = state

    def state_dict(
        self, wrapped: nn.Module, gather: Callable[[object], list[object]]
    ) -> list[HookState] | None:
        """The hook state of every process, in rank order (``gather``: one object from every
        process; each has its own error feedback); None where the wrapper's hook keeps none."""
        state = self._states.get(wrapped)
        if state is None:
            return None
        return cast(list[HookState], gather(state.state_dict()))  # every rank's is a HookState

    def load_state_dict(
        self,
        wrapped: nn.Module,
        states: list[HookState] | None,
        place: tuple[int, int],
        settle: Callable[[], None],
    ) -> None:
        """This process's part (``place``: its rank and the world size) of a state_dict(), into
        the wrapper's hook. DDP lays out its buckets after its first backward, in the order
        gradients became ready; the run that wrote ``states`` compressed in that layout, so a
        first backward (``settle``) comes first: the resumed run's first step runs in it too
        (the same sums, bit for bit)."""
        state = self._states.get(wrapped)
        if state is None:
            return
        rank, world_size = place
        if states is None:
            raise ValueError("it holds no PowerSGD state (--comm-hook powersgd)")
        if len(states) != world_size:
            raise ValueError(
                f"it holds the PowerSGD error feedback of {len(states)} processes, this run has "
                f"{world_size}: resume it on {len(states)} processes (--nproc × --nnodes)"
            )
        settle()
        state.load_state_dict(states[rank])
