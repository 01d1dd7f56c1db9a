"""`dpwise env`: the environment report a user pastes into a bug report. Data only; the text is
dpwise.infra.env_text's."""

from __future__ import annotations

import os
import platform
import sys
from typing import TypedDict

import torch

from dpwise import __version__
from dpwise.infra import hardware

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


class Environment(TypedDict):
    """What `dpwise env` reports (and results.json's environment)."""

    dpwise: str
    python: str
    platform: str
    torch: str
    cuda: str | None
    cuda_available: bool
    nccl_available: bool
    nccl_version: str | None
    gloo_available: bool
    gpus: list[hardware.Gpu]
    peer_access_all_pairs: bool | None
    cpu_cores: int
    cpu_count: int | None
    torch_threads: int
    launcher_env: dict[str, str]


def gather() -> Environment:
    return {
        "dpwise": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cuda_available": torch.cuda.is_available(),
        "nccl_available": hardware.backend_available("nccl"),
        "nccl_version": (
            ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None
        ),
        "gloo_available": hardware.backend_available("gloo"),
        "gpus": hardware.gpus(),
        "peer_access_all_pairs": hardware.peer_access(),
        "cpu_cores": hardware.cpu_cores(),
        "cpu_count": hardware.cpu_count(),
        "torch_threads": hardware.torch_threads(),
        "launcher_env": {k: os.environ[k] for k in LAUNCHER_VARS if k in os.environ},
    }
