"""CompareConfig: what `dpwise compare` runs, validated up front."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dpwise import strategies as registry
from dpwise.config import (
    DEFAULT_TIMEOUT_S,
    OPTIMIZERS,
    PRECISIONS,
    TrainConfig,
    check_timeout,
    finite,
)
from dpwise.errors import DpwiseError


def parse_list(raw: str, flag: str, cast: type = str) -> tuple[Any, ...]:
    items = [part.strip() for part in raw.split(",") if part.strip()]
    if not items:
        raise DpwiseError(f"{flag} is empty; give a comma-separated list")
    try:
        return tuple(cast(item) for item in items)
    except ValueError:
        raise DpwiseError(f"{flag} {raw!r} is not a comma-separated list of integers") from None


@dataclass(frozen=True, kw_only=True)
class CompareConfig:
    model: str = "simple"
    model_args: dict[str, Any] = field(default_factory=dict)
    data: str | None = None
    data_args: dict[str, Any] = field(default_factory=dict)
    loss: str = "auto"
    strategies: tuple[str, ...] = field(default_factory=registry.names)
    world_sizes: tuple[int, ...] | None = None  # None: 1, 2 on CPU; 1, 2, 4 … GPUs on GPU
    epochs: int = 5  # the guide's example trains 5 epochs
    batch_size: int = 256
    repeats: int = 12
    precision: str = "fp32"
    optimizer: str = "sgd"
    lr: float = 0.01
    seed: int = 0
    tolerance: float = 1e-4
    device: str = "auto"
    profile_steps: int = 4
    max_steps: int | None = None  # optimizer steps per repeat, the same for every run
    threads: int | None = None  # CPU threads per process (default: cores, ÷ world size for ddp)
    timeout: float = DEFAULT_TIMEOUT_S  # seconds a ddp collective waits for a peer
    out: Path = Path("runs/compare")
    quiet: bool = False
    find_unused_parameters: bool = False  # set when the model probe finds parameters unused

    @property
    def ddp_options(self) -> dict[str, bool]:
        """What the ddp runs pass to DistributedDataParallel."""
        return {"find_unused_parameters": self.find_unused_parameters}

    def __post_init__(self) -> None:
        known = registry.names()
        unknown = [s for s in self.strategies if s not in known]
        if unknown:
            raise DpwiseError(
                f"--strategies {','.join(unknown)}: unknown; choose from {', '.join(known)}"
            )
        if self.epochs < 2:
            raise DpwiseError(
                f"--epochs must be at least 2 (the first is an untimed warm-up), got {self.epochs}"
            )
        for name in ("repeats", "batch_size", "profile_steps"):
            if getattr(self, name) < 1:
                raise DpwiseError(f"--{name.replace('_', '-')} must be at least 1")
        for name in ("max_steps", "threads"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise DpwiseError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        if self.world_sizes is not None and min(self.world_sizes) < 1:
            raise DpwiseError(f"--world-sizes must be positive, got {self.world_sizes}")
        if self.precision not in PRECISIONS:
            raise DpwiseError(
                f"--precision {self.precision!r} is not one of {', '.join(PRECISIONS)}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise DpwiseError(
                f"--optimizer {self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}"
            )
        check_timeout(self.timeout)
        for name, example in (("lr", "0.01"), ("tolerance", "1e-4")):
            finite(f"--{name}", getattr(self, name), example)
            if not getattr(self, name) > 0:
                raise DpwiseError(f"--{name} must be positive, got {getattr(self, name)}")

    def train_config(self, strategy: str, nproc: int | None) -> TrainConfig:
        """The TrainConfig of one run: the same workload and hyper-parameters for every strategy.
        ``nproc``: the run's processes, for a multi-process strategy (ignored otherwise)."""
        traits = registry.traits(strategy)
        return TrainConfig(
            model=self.model,
            model_args=self.model_args,
            data=self.data,
            data_args=self.data_args,
            loss=self.loss,
            strategy=strategy,
            nproc=nproc if traits.multiprocess else None,
            device=self.device,
            epochs=self.epochs,
            max_steps=self.max_steps,
            threads=self.threads,
            timeout=self.timeout,
            batch_size=self.batch_size,
            lr=self.lr,
            optimizer=self.optimizer,
            precision=self.precision,
            seed=self.seed,
            find_unused_parameters=self.find_unused_parameters
            and "find_unused_parameters" in traits.options,
            quiet=True,
        )
