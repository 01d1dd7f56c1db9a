"""Typed, validated settings of one training run. Errors say what was received and how to fix it."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dpwise import strategies
from dpwise.errors import DpwiseError
from dpwise.infra.settings import at_least, finite, positive, setting, validate

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


def _timeout(flag: str, value: float) -> None:
    """--timeout: seconds, at least 1 (gloo and NCCL need time to connect), at most a week."""
    if not 1 <= value <= MAX_TIMEOUT_S:  # also refuses nan
        raise DpwiseError(
            f"{flag} must be a number of seconds from 1 to {MAX_TIMEOUT_S:.0f}, got {value}; "
            f"e.g. {flag} {DEFAULT_TIMEOUT_S:.0f}"
        )


MODEL_HELP = (
    "simple | cnn | transformer | torchvision:NAME | timm:NAME | transformers:TYPE-or-Class | "
    "pkg.mod:factory (library models start from fresh weights; nothing is downloaded)"
)
DATA_HELP = (
    "pkg.mod:factory returning (inputs, targets), a dict of tensors or a Dataset; or 'synthetic' "
    "(--data-arg shape=3x224x224 classes=10 | vocab=V seq_len=T | outputs=K, samples=N). "
    "Default: the built-in model's data, else synthetic data inferred from the model"
)
LOSS_HELP = (
    "auto (default): the model's own loss when it returns one, cross-entropy for class labels, "
    "token-cross-entropy for (batch, tokens) labels, mse for real-valued targets"
)
TIMEOUT_HELP = (
    "ddp, fsdp: seconds a collective waits for a peer before the run fails (default "
    f"{DEFAULT_TIMEOUT_S:.0f}: room for rank 0 to write a multi-GB checkpoint while the others "
    "wait); a worker that stays stopped this long is killed and named"
)
WORKLOAD_SETTINGS = ("model", "model_args", "data", "data_args", "loss")


def key_values(flag: str, help: str) -> Any:
    """A repeatable `KEY=VALUE` flag gathered into a dict (`--model-arg depth=4`)."""
    return setting(
        factory=dict, flag=flag, parse=parse_kv, action="append", metavar="KEY=VALUE", help=help
    )


@dataclass(frozen=True, kw_only=True)
class WorkloadSettings:
    """The workload flags every command that builds a model takes (train, compare, advise)."""

    model: str = setting("simple", help=MODEL_HELP)
    model_args: dict[str, Any] = key_values("--model-arg", "factory argument")
    data: str | None = setting(None, help=DATA_HELP)
    data_args: dict[str, Any] = key_values("--data-arg", "e.g. samples=20000")
    loss: str = setting("auto", choices=LOSSES, help=LOSS_HELP)


def _path(raw: Any, flag: str) -> Path:
    return Path(raw)


# The settings that place a job's processes, on one node or several: every command that launches
# workers (train, probe-link) offers them, in this order.
PROCESSES = (
    "nproc",
    "device",
    "backend",
    "nnodes",
    "node_rank",
    "rdzv_endpoint",
    "rdzv_backend",
    "rdzv_id",
)


@dataclass(frozen=True, kw_only=True)
class TrainConfig(WorkloadSettings):
    """One training run: workload, strategy, launch and hyper-parameters.

    ``batch_size`` is the GLOBAL batch of one micro-step: every strategy trains on the same rows.
    Each field is a setting (dpwise.infra.settings): its flag, help and checks are declared
    here once.
    """

    strategy: str = setting("single", choices=strategies.names)
    nproc: int | None = setting(
        None,
        type=int,
        checks=[at_least(1)],
        help="ddp, fsdp: workers per node (default: GPUs, else 2)",
    )
    nnodes: int = setting(
        1, type=int, checks=[at_least(1)], help="nodes (multi-node needs rendezvous)"
    )
    node_rank: int = setting(
        0, type=int, checks=[at_least(0)], help="this node's rank (static rdzv)"
    )
    rdzv_endpoint: str | None = setting(None, help="HOST:PORT of the c10d rendezvous (multi-node)")
    rdzv_backend: str = setting("c10d", choices=RDZV_BACKENDS)
    rdzv_id: str = setting("dpwise", help="job id shared by every node of one job")
    max_restarts: int = setting(
        0,
        type=int,
        checks=[at_least(0)],
        metavar="N",
        help="when a worker dies, restart all of them up to N times; they resume from the run's "
        "latest checkpoint (--checkpoint-every)",
    )
    # seconds a collective waits for a peer (ddp, fsdp)
    timeout: float = setting(
        DEFAULT_TIMEOUT_S, type=float, checks=[_timeout], metavar="SECONDS", help=TIMEOUT_HELP
    )
    device: str = setting("auto", choices=DEVICES, help="auto: CUDA when present")
    backend: str = setting("auto", choices=BACKENDS, help="auto: nccl on CUDA")
    epochs: int = setting(2, type=int, checks=[at_least(1)])
    max_steps: int | None = setting(
        None, type=int, checks=[at_least(1)], help="stop after this many optimizer steps"
    )
    batch_size: int = setting(
        256, type=int, checks=[at_least(1)], help="GLOBAL batch per micro-step"
    )
    lr: float = setting(0.01, type=float, checks=[finite("0.01"), positive])
    optimizer: str = setting("sgd", choices=OPTIMIZERS)
    momentum: float = setting(
        0.0, type=float, checks=[at_least(0.0), finite("0.9")], help="SGD momentum"
    )
    weight_decay: float = setting(0.0, type=float, checks=[at_least(0.0), finite("0.01")])
    seed: int = setting(0, type=int, help="data, initial weights and order")
    precision: str = setting("fp32", choices=PRECISIONS, help="autocast dtype")
    accum_steps: int = setting(
        1, type=int, checks=[at_least(1)], help="micro-steps per optimizer step"
    )
    threads: int | None = setting(
        None, type=int, checks=[at_least(1)], help="CPU threads per process (default: cores/nproc)"
    )
    out: Path | None = setting(None, type=Path, help="folder for final.pt and metrics.json")
    checkpoint_every: int | None = setting(
        None, type=int, checks=[at_least(1)], metavar="N", help="checkpoint every N steps"
    )
    resume: Path | None = setting(
        None,
        parse=_path,
        nargs="?",
        const="auto",
        metavar="PATH",
        help="continue from a checkpoint (default: OUT/checkpoint.pt)",
    )
    # DDP: allow parameters the loss does not reach
    find_unused_parameters: bool = setting(
        False,
        action="store_true",
        help="ddp: allow parameters that get no gradient in some steps (skipped blocks, routes)",
    )
    # DDP: the same parameters are used (or not) in every step
    static_graph: bool = setting(
        False,
        action="store_true",
        help="ddp: the same parameters are used (or unused) in every step; cheaper than the above",
    )
    quiet: bool = setting(False, action="store_true", help="print nothing but errors")

    def __post_init__(self) -> None:
        validate(self)
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
