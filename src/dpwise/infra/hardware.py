"""The machine a process runs on: CUDA devices, CPU cores, PyTorch's threads. The only place that
asks PyTorch or the operating system about them, and the only place that sets the thread count.

Torch-free at import (compare imports this before its fork server has imported torch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypedDict

from dpwise.errors import DpwiseError


def cpu_cores() -> int:
    """Cores this process may run on (Linux affinity), else every core of the machine."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def cpu_count() -> int | None:
    """Every core of the machine, whether this process may use it or not."""
    return os.cpu_count()


def cuda_devices() -> int:
    """CUDA devices PyTorch sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


class Gpu(TypedDict):
    """A visible CUDA device (`dpwise env`, results.json's environment)."""

    index: int
    name: str
    memory_bytes: int
    capability: str  # "8.0"


def gpus() -> list[Gpu]:
    """Each visible CUDA device: index, name, memory in bytes, compute capability."""
    import torch

    out: list[Gpu] = []
    for i in range(cuda_devices()):
        props = torch.cuda.get_device_properties(i)
        out.append(
            {
                "index": i,
                "name": props.name,
                "memory_bytes": props.total_memory,
                "capability": f"{props.major}.{props.minor}",
            }
        )
    return out


def gpu_names(count: int) -> list[str]:
    """The names of the first ``count`` CUDA devices."""
    import torch

    return [torch.cuda.get_device_name(i) for i in range(count)]


def smallest_gpu_memory_gib() -> float | None:
    """The memory of the smallest visible GPU in GiB (1024³ bytes); None without one."""
    sizes = [g["memory_bytes"] for g in gpus()]
    return min(sizes) / 1024**3 if sizes else None


def peer_access() -> bool | None:
    """True when every GPU pair can access each other's memory directly (NVLink or PCIe P2P)."""
    import torch

    n = cuda_devices()
    if n < 2:
        return None
    return all(
        torch.cuda.can_device_access_peer(i, j) for i in range(n) for j in range(n) if i != j
    )


def backend_available(backend: str) -> bool:
    """Whether this PyTorch build has the ``nccl`` or ``gloo`` process-group backend."""
    import torch.distributed as dist

    check = {"nccl": "is_nccl_available", "gloo": "is_gloo_available"}[backend]
    return dist.is_available() and getattr(dist, check)()


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """What a run plan needs to know about the machine."""

    cuda_devices: int
    cpu_cores: int

    @classmethod
    def detect(cls) -> Hardware:
        return cls(cuda_devices=cuda_devices(), cpu_cores=cpu_cores())


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


# OpenMP threads that wait for work sleep instead of spinning. A spinning thread burns the time
# slice its partner needs once other processes share the cores: with two CPU-bound jobs beside it,
# a 2-thread single run kept 6 % of its quiet throughput under GNU OpenMP's default policy and 35 %
# with PASSIVE, which cost nothing on a quiet machine (1.01×; bench/omp_wait_policy.py,
# docs/measurements.md). A user's own OMP_WAIT_POLICY is kept.
WAIT_POLICY = "PASSIVE"


def quiet_waits() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless set: before torch is imported (OpenMP reads it as it loads),
    so that this process and every process it starts have it."""
    os.environ.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)


def check_thread_setting() -> None:
    """OMP_NUM_THREADS, when set, must be a positive count (OpenMP's list form, 4,2, too): 0 or
    words make OpenMP warn and fall back to a thread per core in every process, so several
    workers on a node oversubscribe it (2.6-4x slower epochs measured on 2 cores)."""
    value = os.environ.get("OMP_NUM_THREADS")
    if value is None:
        return
    parts = value.strip().split(",")
    if not all(p.strip().isdigit() and int(p) > 0 for p in parts):
        raise DpwiseError(
            f"OMP_NUM_THREADS={value!r} is not a thread count; unset it (dpwise then gives each "
            "worker its share of the cores) or set a positive number"
        )


def configure_threads(threads: int | None, workers_per_node: int) -> int:
    """Threads of this process: ``threads`` when given (--threads); else, when several workers
    share this node and OMP_NUM_THREADS does not say, the cores divided among them. Returns the
    count PyTorch then uses."""
    import torch

    if threads is not None:
        torch.set_num_threads(threads)
    elif "OMP_NUM_THREADS" not in os.environ and workers_per_node > 1:
        torch.set_num_threads(max(1, cpu_cores() // workers_per_node))
    return torch.get_num_threads()
