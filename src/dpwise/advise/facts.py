"""What dpwise knows about the machine and the job, each fact marked given, detected or assumed."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from dpwise.infra import hardware
from dpwise.launch.env import DistEnv

ASSUMED_DEVICE_GIB = 80.0  # an 80 GB data-centre GPU, when there is none to ask


@dataclass(frozen=True)
class Fact:
    value: Any
    source: str  # "given" (a flag), "detected" (asked PyTorch) or "assumed" (a default)
    note: str = ""


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
    env = DistEnv.from_environ()
    found = hardware.cuda_devices()
    nodes_seen = env.world_size // env.local_world_size if env.under_launcher else None
    gib = hardware.smallest_gpu_memory_gib()
    return {
        "gpus": _choose(gpus, found, 0),
        "nodes": _choose(nodes, nodes_seen, 1, "one machine"),
        "device_memory_gib": _choose(
            device_memory, gib, ASSUMED_DEVICE_GIB, "no GPU to ask: an 80 GB GPU is assumed"
        ),
        "peer_access": _choose(
            None, hardware.peer_access(), None, "needs two or more visible GPUs"
        ),
        "nccl_available": Fact(hardware.backend_available("nccl"), "detected"),
        "gloo_available": Fact(hardware.backend_available("gloo"), "detected"),
        "under_torchrun": Fact(env.under_launcher, "detected"),
        "cpu_cores": Fact(hardware.cpu_cores(), "detected"),
        "goal": _choose(goal, None, "production", "production unless --goal prototype"),
        "batch_size": _choose(batch_size, None, 256, "the guide's batch"),
        "precision": _choose(precision, None, "fp32"),
        "optimizer": _choose(optimizer, None, "adamw", "AdamW: the common choice for large models"),
    }


def as_dict(facts: dict[str, Fact]) -> dict[str, dict[str, Any]]:
    return {name: asdict(f) for name, f in facts.items()}
