"""Typed, validated settings of one training run. Errors say what was received and how to fix it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpwise import strategies
from dpwise.errors import DpwiseError
from dpwise.infra.settings import at_least, finite, flag_of, positive, setting, validate
from dpwise.launch.cluster.topology import CLUSTER_HELP, CLUSTERS
from dpwise.launch.settings import DEFAULT_TIMEOUT_S, RDZV_BACKENDS, TIMEOUT_HELP, check_timeout
from dpwise.workload.settings import WorkloadSettings

if TYPE_CHECKING:
    from dpwise.strategies.traits import Traits

PRECISIONS = ("fp32", "bf16", "fp16")
OPTIMIZERS = ("sgd", "adamw")
DEVICES = ("auto", "cpu", "cuda")
BACKENDS = ("auto", "gloo", "nccl")
# Settings that only some strategies take (each strategy's traits.options says which)
# What the fork server imports before it forks the launched workers (dpwise.launch.forking).
WORKER_MODULE = "dpwise.train.worker"

STRATEGY_OPTIONS = (
    "find_unused_parameters",
    "static_graph",
    "bucket_cap_mb",
    "gradient_as_bucket_view",
    "comm_hook",
    "zero1",
    "reshard_after_forward",
    "shard_units",
)
# DDP's communication hooks (torch.distributed.algorithms.ddp_comm_hooks): none, fp16 and bf16
# compression (lossy: the all-reduce adds gradients in 16 bits), PowerSGD (rank-1, lossy)
COMM_HOOKS = ("none", "fp16", "bf16", "powersgd")
# FSDP's units: each repeated block (and the root), or the whole model as one unit
SHARD_UNITS = ("blocks", "model")


def _megabytes(flag: str, value: float | None) -> None:
    if value is not None and not 0 < value <= 2**20:  # also refuses nan
        raise DpwiseError(f"{flag} must be a size in MB above 0 (DDP's default: 25), got {value}")


def _takes(option: str) -> Callable[[Traits], bool]:
    """Whether a strategy's traits list ``option`` among its options."""
    return lambda t: option in t.options


MAX_SEED = 2**63 - 1  # what torch.manual_seed and a torch.Generator take as a count


def _seed(flag: str, value: int) -> None:
    if not 0 <= value <= MAX_SEED:
        raise DpwiseError(f"{flag} must be between 0 and {MAX_SEED}, got {value}")


def _path(raw: Any, flag: str) -> Path:
    return Path(raw)


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
    cluster: str = setting("auto", choices=CLUSTERS, help=CLUSTER_HELP)
    dry_run: bool = setting(
        False,
        action="store_true",
        help="print where the job runs (each value with its source) and the exact command this "
        "node runs, and start nothing",
    )
    # an elastic job's lower node count (a scheduler's MIN:MAX range); not a flag
    min_nnodes: int | None = None
    # seconds a collective waits for a peer (ddp, fsdp)
    timeout: float = setting(
        DEFAULT_TIMEOUT_S, type=float, checks=[check_timeout], metavar="SECONDS", help=TIMEOUT_HELP
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
    seed: int = setting(
        0, type=int, checks=[_seed], help=f"data, initial weights and order (0 to {MAX_SEED})"
    )
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
    bucket_cap_mb: float | None = setting(
        None,
        type=float,
        checks=[_megabytes],
        metavar="MB",
        help="ddp: gradient bucket size in MB (DDP's default 25); lossless",
    )
    gradient_as_bucket_view: bool = setting(
        False,
        action="store_true",
        help="ddp: gradients are views into the all-reduce buckets (less memory, no copy); "
        "lossless",
    )
    comm_hook: str = setting(
        "none",
        choices=COMM_HOOKS,
        help="ddp: compress gradients for the all-reduce: fp16 (gloo, NCCL), bf16 (NCCL), "
        "powersgd (rank 1); lossy: the model drifts from single's",
    )
    zero1: bool = setting(
        False,
        action="store_true",
        help="ddp: shard the optimizer state over the workers (ZeRO-1: torch's "
        "ZeroRedundancyOptimizer; less memory per device, one broadcast of the parameters per "
        "step); lossless",
    )
    reshard_after_forward: bool = setting(
        True,
        flag="--no-reshard-after-forward",
        action="store_false",
        help="fsdp: keep each unit's parameters gathered from forward to backward (ZeRO-2-like: "
        "more memory, one all-gather less per step); lossless",
    )
    shard_units: str = setting(
        "blocks",
        choices=SHARD_UNITS,
        help="fsdp: blocks shards each repeated block as a unit (then the root); model shards "
        "the whole model as one unit (fewer, larger all-gathers; more memory); lossless",
    )
    compile: bool = setting(
        False,
        action="store_true",
        help="compile the model's forward with torch.compile (Module.compile: the names in the "
        "state dict stay the model's); the first steps compile",
    )
    overwrite: bool = setting(
        False,
        action="store_true",
        help="start afresh in an --out that holds another run's checkpoint.pt (deleted when this "
        "run starts); without it, or --resume, such an --out is refused",
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
        if self.min_nnodes is not None and not 1 <= self.min_nnodes <= self.nnodes:
            raise DpwiseError(
                f"an elastic range {self.min_nnodes}:{self.nnodes} must be 1 ≤ MIN ≤ MAX"
            )
        if self.node_rank >= self.nnodes:
            raise DpwiseError(f"--node-rank {self.node_rank} must be below --nnodes {self.nnodes}")
        if self.checkpoint_every is not None and self.out is None:
            raise DpwiseError("--checkpoint-every needs --out DIR to write checkpoints into")
        if self.resume is not None and self.out is None:
            raise DpwiseError("--resume needs --out DIR (the run's outputs go there)")
        if self.overwrite and self.resume is not None:
            raise DpwiseError(
                "--resume continues the run in --out, --overwrite replaces it: give one"
            )

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
        defaults = {f.name: f.default for f in fields(self)}
        for name in STRATEGY_OPTIONS:
            if getattr(self, name) == defaults[name]:
                continue
            if name not in strategies.traits(self.strategy).options:
                takers = " or ".join(strategies.those(_takes(name)))
                flag = flag_of(next(f for f in fields(self) if f.name == name))
                raise DpwiseError(
                    f"{flag} is an option of --strategy {takers} only; it needs --strategy "
                    f"{takers} (got --strategy {self.strategy})"
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
