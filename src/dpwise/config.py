"""Typed, validated settings of one training run. Errors say what was received and how to fix it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from dpwise import strategies
from dpwise.errors import DpwiseError

PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("sgd", "adamw")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")
RDZV_BACKENDS = ("c10d", "static")
# Settings that only some strategies take (each strategy's traits.options says which)
STRATEGY_OPTIONS = ("find_unused_parameters", "static_graph")
LOSSES = ("auto", "cross-entropy", "token-cross-entropy", "mse", "model")
# How long a collective waits for a peer before the run fails (--timeout). Long enough for the
# longest phase one rank spends alone while the others wait at the next collective: rank 0
# writing checkpoint.pt. torch.save + fsync took 3.8 s per GiB on a 2-core cloud VM's disk; the
# largest model DDP trains on one 80 GB GPU (~5e9 parameters with AdamW: 16 B each with the
# gradients) checkpoints 12 B per parameter, ~56 GiB, ~210 s at that rate. Short enough that a
# hung peer ends the run in minutes, not the 30 minutes torch defaults to for gloo (10 for NCCL).
DEFAULT_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def parse_kv(items: list[str] | None, flag: str) -> dict[str, Any]:
    """Turn ['layers=4', 'dim=256'] into {'layers': 4, 'dim': 256} (int, float, bool or str)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise DpwiseError(f"{flag} {item!r} is not KEY=VALUE; write e.g. {flag} layers=4")
        out[key.strip().replace("-", "_")] = _literal(raw.strip())
    return out


def _literal(raw: str) -> Any:
    lowered = raw.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    for cast in (int, float):
        try:
            return cast(raw)
        except ValueError:
            pass
    return raw


def _choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise DpwiseError(f"{name} {value!r} is not one of {', '.join(choices)}")


def check_timeout(value: float) -> None:
    """--timeout: seconds, at least 1 (gloo and NCCL need time to connect), at most a week."""
    if not 1 <= value <= MAX_TIMEOUT_S:  # also refuses nan
        raise DpwiseError(
            f"--timeout must be a number of seconds from 1 to {MAX_TIMEOUT_S:.0f}, got {value}; "
            f"e.g. --timeout {DEFAULT_TIMEOUT_S:.0f}"
        )


def _at_least(name: str, value: int | float | None, low: int | float) -> None:
    if value is not None and not value >= low:  # NaN is not at least anything
        raise DpwiseError(f"{name} must be at least {low}, got {value}")


def finite(name: str, value: float, example: str) -> None:
    """A real number: inf or nan would make every weight non-finite at the first step."""
    if not math.isfinite(value):
        raise DpwiseError(f"{name} must be a finite number, got {value}; e.g. {name} {example}")


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """One training run: workload, strategy, launch and hyper-parameters.

    ``batch_size`` is the GLOBAL batch of one micro-step: every strategy trains on the same rows.
    """

    model: str = "simple"
    model_args: dict[str, Any] = field(default_factory=dict)
    data: str | None = None
    data_args: dict[str, Any] = field(default_factory=dict)
    loss: str = "auto"
    strategy: str = "single"
    nproc: int | None = None
    nnodes: int = 1
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_backend: str = "c10d"
    rdzv_id: str = "dpwise"
    max_restarts: int = 0
    timeout: float = DEFAULT_TIMEOUT_S  # seconds a collective waits for a peer (ddp)
    device: str = "auto"
    backend: str = "auto"
    epochs: int = 2
    max_steps: int | None = None
    batch_size: int = 256
    lr: float = 0.01
    optimizer: str = "sgd"
    momentum: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    precision: str = "fp32"
    accum_steps: int = 1
    threads: int | None = None
    out: Path | None = None
    checkpoint_every: int | None = None
    resume: Path | None = None
    find_unused_parameters: bool = False  # DDP: allow parameters the loss does not reach
    static_graph: bool = False  # DDP: the same parameters are used (or not) in every step
    quiet: bool = False

    def __post_init__(self) -> None:
        _choice("--strategy", self.strategy, strategies.names())
        _choice("--precision", self.precision, PRECISIONS)
        _choice("--optimizer", self.optimizer, OPTIMIZERS)
        _choice("--device", self.device, DEVICES)
        _choice("--backend", self.backend, BACKENDS)
        _choice("--rdzv-backend", self.rdzv_backend, RDZV_BACKENDS)
        for name in ("nproc", "nnodes", "epochs", "max_steps", "batch_size", "accum_steps"):
            _at_least(f"--{name.replace('_', '-')}", getattr(self, name), 1)
        for name in ("threads", "checkpoint_every"):
            _at_least(f"--{name.replace('_', '-')}", getattr(self, name), 1)
        _at_least("--node-rank", self.node_rank, 0)
        _at_least("--max-restarts", self.max_restarts, 0)
        check_timeout(self.timeout)
        _at_least("--momentum", self.momentum, 0.0)
        _at_least("--weight-decay", self.weight_decay, 0.0)
        for name, example in (("lr", "0.01"), ("momentum", "0.9"), ("weight_decay", "0.01")):
            finite(f"--{name.replace('_', '-')}", getattr(self, name), example)
        if not self.lr > 0:
            raise DpwiseError(f"--lr must be positive, got {self.lr}")
        self._check_strategy_fits()
        if self.nnodes > 1 and not self.rdzv_endpoint:
            raise DpwiseError(
                f"--nnodes {self.nnodes} needs --rdzv-endpoint HOST:PORT reachable from every node"
            )
        if self.rdzv_backend == "static" and self.max_restarts > 0:
            raise DpwiseError(
                f"--max-restarts {self.max_restarts} needs --rdzv-backend c10d: the static "
                "rendezvous gives restarted workers the store of the failed ones"
            )
        if self.node_rank >= self.nnodes:
            raise DpwiseError(f"--node-rank {self.node_rank} must be below --nnodes {self.nnodes}")
        if self.checkpoint_every is not None and self.out is None:
            raise DpwiseError("--checkpoint-every needs --out DIR to write checkpoints into")
        if self.resume is not None and self.out is None:
            raise DpwiseError("--resume needs --out DIR (the run's outputs go there)")

    def _check_strategy_fits(self) -> None:
        """Flags only some strategies take. Traits are read only where such a flag is given:
        reading them imports the strategy's module (and torch)."""
        several = self.nproc not in (None, 1) or self.nnodes != 1
        if several and not strategies.traits(self.strategy).multiprocess:
            takers = " or ".join(strategies.those(lambda t: t.multiprocess))
            raise DpwiseError(
                f"--strategy {self.strategy} runs one process; --nproc/--nnodes need "
                f"--strategy {takers}"
            )
        for flag in STRATEGY_OPTIONS:
            if getattr(self, flag) and flag not in strategies.traits(self.strategy).options:
                takers = " or ".join(strategies.those(lambda t, f=flag: f in t.options))
                raise DpwiseError(
                    f"--{flag.replace('_', '-')} is an option of DistributedDataParallel; "
                    f"it needs --strategy {takers} (got --strategy {self.strategy})"
                )

    @property
    def ddp_options(self) -> dict[str, bool]:
        """What a ddp run passes to DistributedDataParallel."""
        return {
            "find_unused_parameters": self.find_unused_parameters,
            "static_graph": self.static_graph,
        }

    @property
    def checkpoint_path(self) -> Path | None:
        return None if self.out is None else self.out / "checkpoint.pt"

    def to_dict(self) -> dict[str, Any]:
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            out[f.name] = str(value) if isinstance(value, Path) else value
        return out
