"""TuneConfig: what `dpwise tune` searches, validated up front."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dpwise.advise.request import AdviseRequest
from dpwise.errors import DpwiseError
from dpwise.infra.settings import finite, like, positive, setting, validate
from dpwise.train.config import TrainConfig
from dpwise.workload.settings import WorkloadSettings

# What the fork server imports before it forks the search's workers (dpwise.launch.forking).
WORKER_MODULE = "dpwise.tune.worker"
TUNED = ("ddp", "fsdp")  # the strategies that have knobs to tune
_UNITS = {"s": 1, "m": 60, "h": 3600}
MIN_BUDGET_S = 10.0  # less than this cannot hold a start-up, let alone a round


def parse_budget(raw: Any, flag: str) -> float:
    """'90', '90s', '10m', '1.5h' → seconds."""
    text = str(raw).strip().lower()
    match = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)\s*([smh]?)", text)
    if match is None:
        raise DpwiseError(
            f"{flag} {raw!r} is not a duration; write seconds (600), minutes (10m) or hours (1h)"
        )
    seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds) or seconds <= 0:
        raise DpwiseError(f"{flag} must be above 0 (e.g. 10m), got {raw!r}")
    return seconds


def _enough(flag: str, value: float) -> None:
    if value < MIN_BUDGET_S:
        raise DpwiseError(
            f"{flag} {value:g}s is too small for one round (starting the workers alone takes "
            f"seconds); give {flag} 5m or more"
        )


def _knob_list(raw: Any, flag: str) -> tuple[str, ...]:
    items = tuple(part.strip().replace("-", "_") for part in str(raw).split(",") if part.strip())
    if not items:
        raise DpwiseError(f"{flag} is empty; give a comma-separated list of knobs")
    return items


def _strategy(flag: str, value: str) -> None:
    if value in TUNED:
        return
    if value == "dp":
        raise DpwiseError(
            f"{flag} dp: DataParallel has nothing to tune (one process, no buckets, hooks or "
            "shards; PyTorch recommends DDP over it); tune --strategy ddp, or see `dpwise advise`"
        )
    if value == "single":
        raise DpwiseError(
            f"{flag} single: one process has no communication to tune; tune --strategy ddp or fsdp"
        )
    raise DpwiseError(f"{flag} {value}: unknown; choose from {', '.join(TUNED)}")


# TrainConfig's settings a candidate's training takes from the search's own settings
NOT_PASSED = {"budget", "knobs", "allow_lossy", "device_memory", "tolerance", "out", "resume",
              "overwrite", "quiet"}  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class TuneConfig(WorkloadSettings):
    """What `dpwise tune` searches: the workload, the strategy and the launch as `dpwise train`
    takes them, and the search's own settings."""

    strategy: str = setting(
        "ddp", checks=[_strategy], metavar="{ddp,fsdp}", help="whose knobs to tune (default: ddp)"
    )
    nproc: int | None = like(TrainConfig, "nproc")
    nnodes: int = like(TrainConfig, "nnodes")
    node_rank: int = like(TrainConfig, "node_rank")
    rdzv_endpoint: str | None = like(TrainConfig, "rdzv_endpoint")
    rdzv_backend: str = like(TrainConfig, "rdzv_backend")
    rdzv_id: str = like(TrainConfig, "rdzv_id")
    cluster: str = like(TrainConfig, "cluster")
    min_nnodes: int | None = None  # an elastic job's lower node count (a scheduler's range)
    timeout: float = like(TrainConfig, "timeout")
    threads: int | None = like(TrainConfig, "threads")
    device: str = like(TrainConfig, "device")
    backend: str = like(TrainConfig, "backend")
    batch_size: int = like(TrainConfig, "batch_size", help="GLOBAL batch of one optimizer step")
    lr: float = like(TrainConfig, "lr")
    optimizer: str = like(TrainConfig, "optimizer")
    momentum: float = like(TrainConfig, "momentum")
    weight_decay: float = like(TrainConfig, "weight_decay")
    seed: int = like(TrainConfig, "seed")
    precision: str = like(TrainConfig, "precision")
    find_unused_parameters: bool = like(TrainConfig, "find_unused_parameters")

    budget: float = setting(
        600.0,
        parse=parse_budget,
        checks=[_enough],
        metavar="TIME",
        help="wall time the whole search may take: 600, 10m, 1h (default: 10m)",
    )
    knobs: tuple[str, ...] | None = setting(
        None,
        parse=_knob_list,
        metavar="K1,K2",
        help="search only these knobs (default: every knob of the strategy; see the list below)",
    )
    compile: bool = setting(
        False, action="store_true", help="also try torch.compile (its first steps compile)"
    )
    allow_lossy: bool = setting(
        False,
        action="store_true",
        help="measure the lossy knobs too (gradient compression hooks) and recommend one when it "
        "wins, with its measured drift",
    )
    device_memory: float | None = like(
        AdviseRequest,
        "device_memory",
        help="memory one device may use, also on the CPU: configurations estimated or measured "
        "above it are left out",
    )
    tolerance: float = setting(
        1e-4,
        type=float,
        checks=[finite("1e-4"), positive],
        help="the largest parameter difference from the default's a lossless knob may leave",
    )
    out: Path = setting(Path("runs/tune"), type=Path, help="folder of results.json and the report")
    resume: bool = setting(
        False, action="store_true", help="continue the search saved in --out (Ctrl-C, a failure)"
    )
    overwrite: bool = setting(
        False, action="store_true", help="start afresh in an --out that holds another search"
    )
    quiet: bool = setting(False, action="store_true", help="print nothing but errors")

    def __post_init__(self) -> None:
        validate(self)
        if self.resume and self.overwrite:
            raise DpwiseError("--resume continues the search in --out, --overwrite replaces it")
        self.train_config({})  # the launch and workload settings, checked as train checks them

    def train_config(self, knobs: dict[str, Any]) -> TrainConfig:
        """The TrainConfig of one configuration: the search's workload and launch, the knobs'
        values (``accum_steps`` splits the global batch into that many micro-batches)."""
        own = {f.name for f in fields(TrainConfig)} - NOT_PASSED
        values = {f.name: getattr(self, f.name) for f in fields(self) if f.name in own}
        values["compile"] = False
        values.update({k: v for k, v in knobs.items() if k != "accum_steps"})
        steps = int(knobs.get("accum_steps", 1))
        values["batch_size"] = self.batch_size // steps
        return TrainConfig(**values, accum_steps=steps, quiet=True, epochs=1)

    def to_dict(self) -> dict[str, Any]:
        return {
            f.name: str(v) if isinstance(v, Path) else list(v) if isinstance(v, tuple) else v
            for f in fields(self)
            for v in [getattr(self, f.name)]
        }
