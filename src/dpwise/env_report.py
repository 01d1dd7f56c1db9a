"""`dpwise env`: the environment report a user pastes into a bug report. Data only."""

from __future__ import annotations

import os
import platform
import sys
from typing import Any

import torch
import torch.distributed as dist

from dpwise import __version__
from dpwise.advise.facts import peer_access
from dpwise.plan import cpu_cores

LAUNCHER_VARS = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_DEBUG",
)


def _gpus() -> list[dict[str, Any]]:
    if not torch.cuda.is_available():
        return []
    out = []
    for i in range(torch.cuda.device_count()):
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


def gather() -> dict[str, Any]:
    available = dist.is_available()
    return {
        "dpwise": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "nccl_available": available and dist.is_nccl_available(),
        "nccl_version": (
            ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        ),
        "gloo_available": available and dist.is_gloo_available(),
        "gpus": _gpus(),
        "peer_access_all_pairs": peer_access(),
        "cpu_cores": cpu_cores(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "launcher_env": {k: os.environ[k] for k in LAUNCHER_VARS if k in os.environ},
    }


def render(info: dict[str, Any]) -> str:
    lines = [f"{'dpwise':<22}{info['dpwise']}"]
    for key in (
        "python",
        "platform",
        "torch",
        "cuda",
        "cuda_available",
        "nccl_available",
        "nccl_version",
        "gloo_available",
        "peer_access_all_pairs",
        "cpu_cores",
        "cpu_count",
        "torch_threads",
    ):
        lines.append(f"{key:<22}{info[key]}")
    lines.append(f"{'gpus':<22}{len(info['gpus'])}")
    for g in info["gpus"]:
        lines.append(
            f"  [{g['index']}] {g['name']}, {g['memory_bytes'] / 1024**3:.1f} GiB, "
            f"sm {g['capability']}"
        )
    lines.append(f"{'launcher variables':<22}{'none set' if not info['launcher_env'] else ''}")
    lines += [f"  {k}={v}" for k, v in info["launcher_env"].items()]
    return "\n".join(lines)
