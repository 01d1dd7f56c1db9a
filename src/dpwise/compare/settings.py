"""CompareConfig: what `dpwise compare` runs, validated up front."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dpwise import strategies as registry
from dpwise.errors import DpwiseError
from dpwise.infra.settings import at_least, finite, like, positive, setting, validate
from dpwise.projection.links import DEFAULT_LINKS, EXAMPLE, check_names
from dpwise.projection.model import DEFAULT_DEVICES
from dpwise.train.config import TrainConfig
from dpwise.workload.settings import WorkloadSettings


def parse_list(raw: str, flag: str, cast: type = str) -> tuple[Any, ...]:
    items = [part.strip() for part in raw.split(",") if part.strip()]
    if not items:
        raise DpwiseError(f"{flag} is empty; give a comma-separated list")
    try:
        return tuple(cast(item) for item in items)
    except ValueError:
        raise DpwiseError(f"{flag} {raw!r} is not a comma-separated list of integers") from None


def _list(raw: str, flag: str) -> tuple[str, ...]:
    return parse_list(raw, flag)


def _int_list(raw: str, flag: str) -> tuple[int, ...]:
    return parse_list(raw, flag, int)


def _known_strategies(flag: str, value: tuple[str, ...]) -> None:
    known = registry.names()
    unknown = [s for s in value if s not in known]
    if unknown:
        raise DpwiseError(f"{flag} {','.join(unknown)}: unknown; choose from {', '.join(known)}")


def _warm_up_and_one(flag: str, value: int) -> None:
    if value < 2:
        raise DpwiseError(
            f"{flag} must be at least 2 (the first is an untimed warm-up), got {value}"
        )


def _positive_sizes(flag: str, value: tuple[int, ...] | None) -> None:
    if value is not None and min(value) < 1:
        raise DpwiseError(f"{flag} must be positive, got {value}")


def _device_counts(flag: str, value: tuple[int, ...]) -> None:
    if min(value) < 1 or max(value) > 2**20:
        raise DpwiseError(f"{flag} {','.join(map(str, value))}: give device counts from 1 to 2**20")


# Settings of compare's own that mean something else in a run: the report folder, the progress
# display, and find_unused_parameters (passed only to the strategies that take it).
# What the fork server imports before it forks the run processes (dpwise.launch.forking).
RUN_MODULE = "dpwise.compare.worker"

NOT_PASSED_TO_RUNS = {"out", "quiet", "find_unused_parameters", "cluster", "dry_run"}


@dataclass(frozen=True, kw_only=True)
class CompareConfig(WorkloadSettings):
    """What `dpwise compare` runs. Each field is a setting (dpwise.infra.settings); those that mean
    the same as in `dpwise train` are TrainConfig's, taken with ``like``."""

    strategies: tuple[str, ...] = setting(
        factory=registry.compared_by_default,
        parse=_list,
        checks=[_known_strategies],
        # names only: the CLI builds this help before torch (and the traits) are imported
        help=f"comma-separated, of {', '.join(registry.names())} "
        "(default: all but fsdp, which runs when named)",
    )
    # None: 1, 2 on CPU; 1, 2, 4 … GPUs on GPU
    world_sizes: tuple[int, ...] | None = setting(
        None,
        parse=_int_list,
        checks=[_positive_sizes],
        help="e.g. 1,2,4 (default: 1,2 on CPU; 1,2,4… GPUs on GPU)",
    )
    # the guide's example trains 5 epochs
    epochs: int = setting(
        5, type=int, checks=[_warm_up_and_one], help="epochs per repeat (first is warm-up)"
    )
    batch_size: int = like(TrainConfig, "batch_size", help="GLOBAL batch")
    repeats: int = setting(12, type=int, checks=[at_least(1)], help="timed repeats per run")
    precision: str = like(TrainConfig, "precision")
    optimizer: str = like(TrainConfig, "optimizer")
    lr: float = like(TrainConfig, "lr")
    seed: int = like(TrainConfig, "seed")
    tolerance: float = setting(
        1e-4, type=float, checks=[finite("1e-4"), positive], help="convergence threshold"
    )
    device: str = like(TrainConfig, "device")
    profile_steps: int = setting(
        4, type=int, checks=[at_least(1)], help="steps under torch.profiler"
    )
    max_steps: int | None = like(
        TrainConfig, "max_steps", help="optimizer steps per repeat, the same for every run"
    )
    threads: int | None = like(
        TrainConfig,
        "threads",
        help="CPU threads per process (default: cores; ÷ world size for ddp)",
    )
    timeout: float = like(TrainConfig, "timeout")
    cluster: str = like(TrainConfig, "cluster")
    dry_run: bool = like(
        TrainConfig,
        "dry_run",
        help="print where compare would run (a scheduler's job is read as train reads it) and "
        "the exact command, and start nothing",
    )
    # compare --script: the user's own scripts (commands/compare.py runs them)
    scripts: tuple[str, ...] = setting(
        factory=tuple,
        flag="scripts",
        parse=lambda raw, flag: tuple(raw),
        nargs="*",
        metavar="SCRIPT",
        help="your own training scripts (as --script)",
    )
    script_commands: tuple[str, ...] = setting(
        factory=tuple,
        flag="--script",
        parse=lambda raw, flag: tuple(raw),
        action="append",
        metavar="CMD",
        help="a command line you run today, quoted: 'python dp_train.py', 'torchrun "
        "--nproc_per_node=2 train.py --lr 0.1' (repeatable; the first is the reference)",
    )
    reference: str | None = setting(
        None,
        metavar="SCRIPT",
        help="with scripts: the one the others are held to (its file name or its command line; "
        "default: the first)",
    )
    out: Path = setting(Path("runs/compare"), type=Path, help="report folder")
    quiet: bool = setting(False, action="store_true", help="no progress display")
    # set when the model probe finds parameters unused
    find_unused_parameters: bool = setting(
        False,
        action="store_true",
        help="run ddp with find_unused_parameters (turned on by itself when the model probe sees "
        "parameters go unused; force it when a rarely skipped block escaped the probe)",
    )

    project_links: tuple[str, ...] = setting(
        factory=lambda: DEFAULT_LINKS,
        parse=_list,
        checks=[check_names],
        help=f"links the scaling projection uses, comma-separated: {EXAMPLE} (default: "
        f"{','.join(DEFAULT_LINKS)})",
    )
    project_devices: tuple[int, ...] = setting(
        factory=lambda: DEFAULT_DEVICES,
        parse=_int_list,
        checks=[_device_counts],
        help="device counts the scaling projection reaches (default: 2,4,…,1024)",
    )

    @property
    def ddp_options(self) -> dict[str, bool]:
        """What the ddp runs pass to DistributedDataParallel."""
        return {"find_unused_parameters": self.find_unused_parameters}

    def __post_init__(self) -> None:
        validate(self)

    def train_config(self, strategy: str, nproc: int | None) -> TrainConfig:
        """The TrainConfig of one run: the same workload and hyper-parameters for every strategy
        (every setting the two share, but those below). ``nproc``: the run's processes, for a
        multi-process strategy (ignored otherwise)."""
        traits = registry.traits(strategy)
        own = {f.name for f in fields(TrainConfig)} - NOT_PASSED_TO_RUNS
        return TrainConfig(
            **{f.name: getattr(self, f.name) for f in fields(self) if f.name in own},
            strategy=strategy,
            nproc=nproc if traits.multiprocess else None,
            find_unused_parameters=self.find_unused_parameters
            and "find_unused_parameters" in traits.options,
            quiet=True,
        )
