"""What dpwise knows about the machine and the job, each fact marked given, detected or assumed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from dpwise.launch_env import DistEnv
from dpwise.plan import cpu_cores

ASSUMED_DEVICE_GIB = 80.0  # an 80 GB data-centre GPU, when there is none to ask


@dataclass(frozen=True)
class Fact:
    value: Any
    source: str  # "given" (a flag), "detected" (asked PyTorch) or "assumed" (a default)
    note: str = ""


def _gpu_memory_gib() -> float | None:
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return None
    sizes = [
        torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count())
    ]
    return min(sizes) / 1024**3


def peer_access() -> bool | None:
    """True when every GPU pair can access each other's memory directly (NVLink or PCIe P2P)."""
    n = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if n < 2:
        return None
    return all(
        torch.cuda.can_device_access_peer(i, j) for i in range(n) for j in range(n) if i != j
    )


def _choose(given: Any, detected: Any, assumed: Any, note: str = "") -> Fact:
    if given is not None:
        return Fact(given, "given")
    if detected is not None:
        return Fact(detected, "detected")
    return Fact(assumed, "assumed", note)


def gather(
    gpus: int | None,
    nodes: int | None,
    device_memory: float | None,
    goal: str | None,
    batch_size: int | None,
    precision: str | None,
    optimizer: str | None,
) -> dict[str, Fact]:
    import torch.distributed as dist

    env = DistEnv.from_environ()
    found = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nodes_seen = env.world_size // env.local_world_size if env.under_launcher else None
    gib = _gpu_memory_gib()
    return {
        "gpus": _choose(gpus, found, 0),
        "nodes": _choose(nodes, nodes_seen, 1, "one machine"),
        "device_memory_gib": _choose(
            device_memory, gib, ASSUMED_DEVICE_GIB, "no GPU to ask: an 80 GB GPU is assumed"
        ),
        "peer_access": _choose(None, peer_access(), None, "needs two or more visible GPUs"),
        "nccl_available": Fact(dist.is_available() and dist.is_nccl_available(), "detected"),
        "gloo_available": Fact(dist.is_available() and dist.is_gloo_available(), "detected"),
        "under_torchrun": Fact(env.under_launcher, "detected"),
        "cpu_cores": Fact(cpu_cores(), "detected"),
        "goal": _choose(goal, None, "production", "production unless --goal prototype"),
        "batch_size": _choose(batch_size, None, 256, "the guide's batch"),
        "precision": _choose(precision, None, "fp32"),
        "optimizer": _choose(optimizer, None, "adamw", "AdamW: the common choice for large models"),
    }


def as_dict(facts: dict[str, Fact]) -> dict[str, dict[str, Any]]:
    return {name: asdict(f) for name, f in facts.items()}
