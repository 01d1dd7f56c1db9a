"""What a training run produces, as data: an epoch's report, the run's result (metrics.json's
body) and the trained model with its whole state. Rendering and writing live elsewhere."""

from __future__ import annotations

import platform
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

import torch
from torch import nn

from dpwise import __version__


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


class EpochRecord(TypedDict):
    """One finished epoch, as metrics.json and a checkpoint record it."""

    epoch: int  # 1-based
    steps: int
    samples: int
    seconds: float
    samples_per_s: float
    mean_loss: float


class PeakRecord(TypedDict):
    """One device's peak memory (dpwise.measure.memory.peaks), with the rank that measured it."""

    rank: int
    device: str
    bytes: int
    kind: str  # what was measured: "cuda_max_memory_allocated" or "cpu_peak_rss"


class WorkerRecord(TypedDict):
    """One training process: where it ran and with how many threads."""

    rank: int
    pid: int
    host: str
    address: str | None  # None: one process
    threads: int


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
    epochs: list[EpochRecord] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    peak_memory: list[PeakRecord] = field(default_factory=list)
    workers: list[WorkerRecord] = field(default_factory=list)
    resumed_at_step: int | None = None
    restarts: int = 0  # times the launcher restarted the workers (each resumed on its own)
    diverged: dict[str, Any] | None = None  # the first non-finite loss (a compare run goes on)
    sharded_units: list[str] | None = None  # what a sharding strategy shards, in order

    @property
    def final_loss(self) -> float | None:
        return self.losses[-1] if self.losses else None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "final_loss": self.final_loss}


@dataclass(frozen=True, kw_only=True)
class Metrics:
    """metrics.json: the run's result with the versions, the batch, where it was written, the
    settings and where the job ran."""

    result: RunResult
    per_rank_batch: int
    global_batch: int
    out: str | None
    config: dict[str, Any]  # TrainConfig.to_dict()
    topology: dict[str, Any] | None  # where the job ran, each value with its source

    def to_dict(self) -> dict[str, Any]:
        """The document (schema 1), in its keys' order."""
        return {
            "schema": 1,
            "dpwise_version": __version__,
            "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            **self.result.to_dict(),
            "per_rank_batch": self.per_rank_batch,
            "global_batch": self.global_batch,
            "out": self.out,
            "config": self.config,
            "topology": self.topology,
        }


@dataclass
class Trained:
    result: RunResult
    model: nn.Module  # unwrapped: its state dict has no ``module.`` prefix
    state: dict[str, torch.Tensor]  # the whole model's state dict (complete on the main process)
