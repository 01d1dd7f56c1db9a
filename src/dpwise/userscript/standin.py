"""The stand-in a user's script runs under where it cannot run as written: every change to
torch's behaviour the harness makes for it, in one place (the script's text is never changed).

On a machine without CUDA (`torch.cuda.is_available()` is False), CUDA placements run on the
CPU, so that a GPU script can be checked here (``install``):
- `torch.cuda.device_count()` answers DPWISE_SCRIPT_DEVICES (default 1): the devices a
  DataParallel script spreads over and the processes a self-spawning one starts
  (`mp.spawn(train, nprocs=torch.cuda.device_count())`);
- `torch.cuda.set_device(rank)` does nothing;
- `.cuda()`, `.cuda(rank)`, `.to(rank)`, `.to("cuda:1")`, `.to(torch.device("cuda"))` of a tensor
  or a module stay on (or go to) the CPU;
- `init_process_group` with NCCL (however spelled: "nccl", "cuda:nccl", "cpu:gloo,cuda:nccl",
  `Backend.NCCL`) starts gloo;
- `DistributedDataParallel(model, device_ids=[rank], output_device=rank)` of a CPU module drops
  both (DDP refuses device ids for a CPU module);
- a script's `torch.multiprocessing.spawn` and `start_processes` fork their processes (the
  harness's `spawning`): the CPU has no CUDA state a fork would break, and a fresh interpreter
  costs seconds of imports per process.
DataParallel needs nothing: without CUDA torch's own wrapper runs the module itself.

Everywhere (``use_port``): with DPWISE_SCRIPT_PORT set, `init_process_group` by the environment
(`env://`, the default) meets on that port whatever MASTER_PORT the script set (a guide's
`os.environ["MASTER_PORT"] = "29500"`), so that two runs at once do not meet on one port.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import torch

DEVICES = "DPWISE_SCRIPT_DEVICES"
PORT = "DPWISE_SCRIPT_PORT"
_installed: set[str] = set()  # what this process has installed (a fork has its parent's)


def active() -> bool:
    """Whether CUDA placements stand in on the CPU here (no CUDA device)."""
    return not torch.cuda.is_available()


def install() -> None:
    """The CPU's stand-in for CUDA, where this machine has no CUDA device; else nothing."""
    if not active() or "cuda" in _installed:
        return
    _installed.add("cuda")
    devices = int(os.environ.get(DEVICES) or "1")
    torch.cuda.device_count = lambda: devices
    torch.cuda.set_device = lambda device: None
    for cls in (torch.Tensor, torch.nn.Module):
        to = cls.to

        def moved(self: Any, *args: Any, _to: Any = to, **kwargs: Any) -> Any:
            if "device" in kwargs:
                kwargs["device"] = _cpu(kwargs["device"])
            return _to(self, *[_cpu(a) for a in args], **kwargs)

        cls.to = moved  # type: ignore[method-assign]  # placements on the CPU, on purpose
        cls.cuda = lambda self, *args, **kwargs: self  # type: ignore[method-assign]  # as above
    _gloo_for_nccl()
    _ddp_without_devices()


def _cpu(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return "cpu"
    if isinstance(value, str) and value.startswith("cuda"):
        return "cpu"
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device("cpu")
    return value


def _gloo_for_nccl() -> None:
    def backend(given: Any) -> Any:
        return "gloo" if given is not None and "nccl" in str(given).lower() else given

    _wrap_init(lambda args, kwargs: _replace(args, kwargs, 0, "backend", backend))


def _ddp_without_devices() -> None:
    from torch.nn.parallel import DistributedDataParallel

    init = DistributedDataParallel.__init__

    @functools.wraps(init)
    def __init__(
        self: DistributedDataParallel,
        module: torch.nn.Module,
        device_ids: Any = None,
        output_device: Any = None,
        *args: Any,
        **kwargs: Any,
    ) -> None:
        init(self, module, None, None, *args, **kwargs)

    DistributedDataParallel.__init__ = __init__  # type: ignore[method-assign]  # CPU modules, on purpose


def use_port() -> None:
    """`init_process_group` by the environment meets on DPWISE_SCRIPT_PORT, where it is set."""
    port = os.environ.get(PORT)
    if not port or "port" in _installed:
        return
    _installed.add("port")

    def on_our_port(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        method = args[1] if len(args) > 1 else kwargs.get("init_method")
        if method in (None, "env://") and kwargs.get("store") is None:
            os.environ["MASTER_PORT"] = port  # put back after the call (_wrap_init)
        return args

    _wrap_init(on_our_port)


def _replace(
    args: tuple[Any, ...], kwargs: dict[str, Any], at: int, name: str, how: Callable[[Any], Any]
) -> tuple[Any, ...]:
    """``how`` applied to the argument at position ``at`` or named ``name``, in place."""
    if len(args) > at:
        return (*args[:at], how(args[at]), *args[at + 1 :])
    if name in kwargs:
        kwargs[name] = how(kwargs[name])
    return args


def _wrap_init(change: Callable[[tuple[Any, ...], dict[str, Any]], tuple[Any, ...]]) -> None:
    """`init_process_group` with its arguments changed first; MASTER_PORT is as the script left
    it once the call returns."""
    import torch.distributed as dist

    init = dist.init_process_group

    @functools.wraps(init)
    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        before = os.environ.get("MASTER_PORT")
        args = change(args, kwargs)
        try:
            return init(*args, **kwargs)
        finally:
            if before is None:
                os.environ.pop("MASTER_PORT", None)
            else:
                os.environ["MASTER_PORT"] = before

    dist.init_process_group = init_process_group
    torch.distributed.distributed_c10d.init_process_group = init_process_group  # its module's too
