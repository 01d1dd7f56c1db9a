"""What a training run produces, as data: an epoch's report, the run's result (metrics.json's
body) and the trained model with its whole state. Rendering and writing live elsewhere."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class EpochReport:
    epoch: int  # 1-based
    epochs: int
    steps: int
    samples: int
    seconds: float
    mean_loss: float

    @property
    def samples_per_s(self) -> float:
        return self.samples / self.seconds if self.seconds > 0 else 0.0


@dataclass(kw_only=True)
class RunResult:
    """What one run measured. Pure data: rendering and writing live elsewhere."""

    strategy: str
    world_size: int
    backend: str | None
    device: str
    devices: list[str]
    notes: list[str]
    steps_per_epoch: int
    rows_dropped_per_epoch: int
    global_steps: int = 0
    epochs: list[dict[str, Any]] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    peak_memory: list[dict[str, Any]] = field(default_factory=list)
    workers: list[dict[str, Any]] = field(default_factory=list)
    resumed_at_step: int | None = None
    restarts: int = 0  # times the launcher restarted the workers (each resumed on its own)
    diverged: dict[str, Any] | None = None  # the first non-finite loss (a compare run goes on)
    sharded_units: list[str] | None = None  # what a sharding strategy shards, in order

    @property
    def final_loss(self) -> float | None:
        return self.losses[-1] if self.losses else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "final_loss": self.final_loss}


@dataclass
class Trained:
    result: RunResult
    model: nn.Module  # unwrapped: its state dict has no ``module.`` prefix
    state: dict[str, torch.Tensor]  # the whole model's state dict (complete on the main process)
