"""Run dpwise's training in this process (single / dp) and read the result back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from dpwise.train.config import TrainConfig
from dpwise.train.worker import run_worker


def train_here(out: Path, **kwargs: Any) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    kwargs.setdefault("quiet", True)
    metrics = run_worker(TrainConfig(out=out, **kwargs))
    state = torch.load(out / "final.pt", map_location="cpu", weights_only=True)
    return state, metrics
