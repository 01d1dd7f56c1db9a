"""Measure the collectives of an initialised process group, the way nccl-tests does.

For each message size (whole-tensor bytes, ×4 from ``min_bytes`` to ``max_bytes``): a barrier,
warm-up operations, then timed ones, each timed alone (the device synchronised before and after
on CUDA); a process's figure is the median of its timed operations, and the size's figure the
largest median over the processes (an all-reduce MAX over the same group), so every process
ends with the same numbers. (nccl-tests reports the mean over its iterations; the median keeps
one operation slowed by another program on a shared machine out of the figure.) Then α and β
are fitted per op (dpwise.link.fit).

Time budget: a size gets ``MAX_ITERS`` timed operations while they are fast; once a size's
timed operations took longer than ``SIZE_BUDGET_S``, the next (4× larger) size gets fewer,
down to ``MIN_ITERS``, and one warm-up. On a 2-core machine over gloo/loopback the default sizes
up to 64 MiB take a few seconds per op; on a 25 MB/s link the 64 MiB all-reduce alone takes
~2.7 s an operation, so ~11 s for that size (4 operations).
"""

from __future__ import annotations

import socket
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.distributed as dist

from dpwise.link import fit as fitting
from dpwise.measure.profile import step_times

MIN_BYTES = 8
MAX_ITERS = 20
MIN_ITERS = 3
WARMUP = 2
SIZE_BUDGET_S = 0.5

Progress = Callable[[str], None]


def _collective(op: str) -> Callable[..., Any]:
    """The tensor collective for ``op``: torch's newer names where this torch has them."""
    names = {
        "reduce_scatter": ("reduce_scatter_single", "reduce_scatter_tensor"),
        "all_gather": ("all_gather_single", "all_gather_into_tensor"),
    }[op]
    return next(getattr(dist, name) for name in names if hasattr(dist, name))


def _runner(op: str, nbytes: int, n: int, device: torch.device, group: Any) -> Callable[[], None]:
    """A function running one ``op`` on a message of ``nbytes`` (the whole tensor)."""
    count = nbytes // 4
    whole = torch.zeros(count, dtype=torch.float32, device=device)  # zeros: sums stay finite
    if op == "all_reduce":
        return lambda: dist.all_reduce(whole, group=group)
    part = torch.zeros(count // n, dtype=torch.float32, device=device)
    call = _collective(op)
    if op == "reduce_scatter":
        return lambda: call(part, whole, group=group)
    return lambda: call(whole, part, group=group)


def _agreed_max(value: float, device: torch.device, group: Any) -> float:
    t = torch.tensor([value], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return float(t.item())


def _unsupported(op: str, n: int, device: torch.device, group: Any) -> str | None:
    """Why this group cannot run ``op`` (a tiny trial), or None. Every process agrees."""
    reason = ""
    try:
        _runner(op, 4 * n, n, device, group)()
    except (RuntimeError, NotImplementedError, ValueError) as exc:  # the backend refuses it
        reason = f"{dist.get_backend(group)}: {str(exc).strip().splitlines()[0][:160]}"
    failed = _agreed_max(1.0 if reason else 0.0, device, group)
    return (reason or "another process could not run it") if failed else None


def measure_op(
    op: str,
    byte_sizes: Sequence[int],
    device: torch.device,
    group: Any = None,
    progress: Progress | None = None,
    max_iters: int = MAX_ITERS,
) -> dict[str, Any]:
    """The points and fit of one op over ``byte_sizes`` (multiples of 4·n bytes)."""
    n = dist.get_world_size(group)
    reason = None if op == "all_reduce" else _unsupported(op, n, device, group)
    if reason is not None:
        return {"unsupported": reason}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    points, iters, warm = [], max_iters, WARMUP
    for nbytes in byte_sizes:
        run = _runner(op, nbytes, n, device, group)
        step_times(run, warm, sync)
        dist.barrier(group=group)
        seconds = _agreed_max(statistics.median(step_times(run, iters, sync)), device, group)
        points.append({**fitting.point(op, n, nbytes, seconds), "iterations": iters})
        if progress is not None:
            progress(f"{op} {nbytes} B: {seconds * 1e6:.1f} us ({iters} timed)")
        if seconds * iters > SIZE_BUDGET_S:  # the next size is 4x larger: fewer operations
            iters = max(MIN_ITERS, min(iters, int(SIZE_BUDGET_S / (4 * seconds))))
            warm = 1
        del run
    result: dict[str, Any] = {"points": points}
    result["fit"] = fitting.fit(op, n, [p["bytes"] for p in points], [p["seconds"] for p in points])
    return result


def probe_link(
    max_bytes: int,
    ops: Sequence[str] = ("all_reduce",),
    *,
    min_bytes: int = MIN_BYTES,
    device: torch.device | None = None,
    group: Any = None,
    progress: Progress | None = None,
    max_iters: int = MAX_ITERS,
) -> dict[str, Any]:
    """Measure ``ops`` over ``group`` (default: the whole world) from ``min_bytes`` to
    ``max_bytes``; every process of the group must call it, and every one returns the same
    JSON-safe dict (world_size, backend, device_type, ops: {op: {points, fit} or
    {unsupported}}, plus sizes, the processes' host names and the seconds it took).
    ``max_iters``: timed operations per size while sizes are fast (fewer once they are not)."""
    started = time.perf_counter()
    n = dist.get_world_size(group)
    if n < 2:
        raise ValueError(f"a link probe needs at least 2 processes, the group has {n}")
    backend = str(dist.get_backend(group))
    if device is None:
        device = _default_device(backend)
    max_bytes = int(_agreed_max(float(max_bytes), device, group))  # one set of sizes for all
    byte_sizes = fitting.sizes(min_bytes, max_bytes, n)
    hosts: list[Any] = [None] * n
    dist.all_gather_object(hosts, socket.gethostname(), group=group)
    result = {
        "world_size": n,
        "backend": backend,
        "device_type": device.type,
        "min_bytes": byte_sizes[0],
        "max_bytes": byte_sizes[-1],
        "hosts": hosts,
        "ops": {op: measure_op(op, byte_sizes, device, group, progress, max_iters) for op in ops},
    }
    result["seconds"] = time.perf_counter() - started
    return result


def _default_device(backend: str) -> torch.device:
    if backend == "nccl" and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
