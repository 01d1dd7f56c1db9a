"""What `dpwise tune` searches: its settings (TuneConfig, validated up front), the knobs of the
strategy, and the candidates they make for one model.

A candidate is a configuration: the knobs it changes from the default, by their TrainConfig
names (``accum_steps``: the global batch split into that many micro-batches). Knobs the backend
or the model cannot take are kept with the reason, never silently dropped. A strategy's own
knobs are its traits' ``options``. Nothing here imports torch: the CLI builds its parser from
TuneConfig before torch loads.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from dpwise import strategies
from dpwise.advise.request import AdviseRequest
from dpwise.errors import DpwiseError
from dpwise.infra.settings import finite, like, positive, setting, validate
from dpwise.strategies.traits import VISIBLE
from dpwise.train.config import TrainConfig
from dpwise.tune.journal import Candidate, is_lossy
from dpwise.workload.settings import WorkloadSettings

# What the fork server imports before it forks the search's workers (dpwise.launch.forking).
WORKER_MODULE = "dpwise.tune.worker"
_UNITS = {"s": 1, "m": 60, "h": 3600}
MIN_BUDGET_S = 10.0  # less than this cannot hold a start-up, let alone a round
DDP_DEFAULT_BUCKET_MB = 25.0  # DistributedDataParallel's bucket_cap_mb

# the knobs, in the order the search tries them: a strategy's own (its traits' options), then
# those of TrainConfig every tuned strategy takes
KNOBS = ("bucket_cap_mb", "gradient_as_bucket_view", "static_graph", "comm_hook", "zero1",
         "reshard_after_forward", "shard_units", "accum_steps", "compile")  # fmt: skip
EVERY_STRATEGY = ("accum_steps", "compile")


# -- the settings ---------------------------------------------------------------------------------
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


def duration(seconds: float) -> str:
    """Seconds as the budget is written: 45s, 5m, 2m30s, 1h05m."""
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s" if secs else f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


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


def tuned() -> tuple[str, ...]:
    """The strategies with knobs to tune: those whose processes communicate (registry order)."""
    return tuple(n for n in strategies.names() if strategies.multiprocess(n))


def _strategy(flag: str, value: str) -> None:
    if value in tuned():  # the registry knows it without importing torch
        return
    if value not in strategies.names():
        raise DpwiseError(f"{flag} {value}: unknown; choose from {', '.join(tuned())}")
    if strategies.traits(value).devices == VISIBLE:  # one process driving every visible GPU
        raise DpwiseError(
            f"{flag} {value}: DataParallel has nothing to tune (one process, no buckets, hooks "
            "or shards; PyTorch recommends DDP over it); tune --strategy ddp, or see "
            "`dpwise advise`"
        )
    raise DpwiseError(
        f"{flag} {value}: one process has no communication to tune; tune --strategy "
        f"{' or '.join(tuned())}"
    )


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

    @property
    def memory_limit(self) -> int | None:
        """--device-memory in bytes (None: not given)."""
        return None if self.device_memory is None else int(self.device_memory * 2**30)

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


# -- the candidates -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Facts:
    """What the candidates depend on: the model, the world, the backend and the settings."""

    strategy: str
    gradient_bytes: int
    backend: str
    worlds: tuple[int, ...]  # every world size the job may have (an elastic range: several)
    batch_size: int  # the global batch of one optimizer step
    varying: str = ""  # parameters the model uses in some steps only ("" when none)
    sparse: str = ""  # layers that give sparse gradients ("" when none)
    allow_lossy: bool = False
    compile: bool = False
    knobs: tuple[str, ...] | None = None  # --knobs


def _options(strategy: str) -> tuple[str, ...]:
    return strategies.traits(strategy).options


def _own(strategy: str) -> list[str]:
    options = _options(strategy)
    return [k for k in KNOBS if k in options or k in EVERY_STRATEGY]


def chosen_knobs(facts: Facts) -> tuple[str, ...]:
    """The knobs to search: --knobs (each checked), else every knob of the strategy."""
    own = _own(facts.strategy)
    if facts.knobs is None:
        return tuple(k for k in own if k != "compile" or facts.compile)
    for name in facts.knobs:
        if name in own:
            continue
        if name in KNOBS:
            takers = " or ".join(n for n in strategies.names() if name in _options(n))
            raise DpwiseError(
                f"--knobs {name} is a knob of --strategy {takers}, not {facts.strategy}; "
                f"{facts.strategy}'s knobs: {', '.join(own)}"
            )
        raise DpwiseError(
            f"--knobs {name}: not a knob of --strategy {facts.strategy}; its knobs: "
            f"{', '.join(own)}"
        )
    if "static_graph" in facts.knobs and facts.varying:
        raise DpwiseError(
            f"--knobs static_graph: {facts.varying} get a gradient in some steps and none in "
            "others, so the graph is not static (DDP would fail or train wrongly); leave "
            "static_graph out of --knobs"
        )
    return tuple(dict.fromkeys(facts.knobs))


def bucket_sizes(gradient_bytes: int) -> list[float]:
    """A few sizes around the model's gradients: smaller (more overlap with backward), larger
    (fewer all-reduce calls), the whole model in one bucket. A size at or above the gradients
    buckets like DDP's default when the default holds them all already."""
    from dpwise.strategies.hooks import one_bucket_mb  # imports torch: not before the parser

    mb = gradient_bytes / 2**20
    sizes: list[float] = []
    for size in (5.0, 100.0, round(mb / 4, 2), one_bucket_mb(gradient_bytes)):
        if size < 0.25 or size >= 2**20:
            continue
        if mb <= DDP_DEFAULT_BUCKET_MB and size >= mb:
            continue  # one bucket either way, as the default
        if abs(size - DDP_DEFAULT_BUCKET_MB) / DDP_DEFAULT_BUCKET_MB < 0.2:
            continue
        if any(abs(size - s) / s < 0.2 for s in sizes):
            continue
        sizes.append(size)
    return sizes


def splits(batch_size: int, worlds: tuple[int, ...]) -> list[int]:
    """Accumulation steps k that split the global batch into micro-batches every world divides."""
    return [
        k for k in (2, 4) if batch_size % k == 0 and all((batch_size // k) % w == 0 for w in worlds)
    ]


def first_stage(facts: Facts) -> list[Candidate]:
    """One candidate per knob value, each changing one knob from the default."""
    out: list[Candidate] = []
    for knob in chosen_knobs(facts):
        for value, skip in _values(knob, facts):
            config = {knob: value}
            lossy = is_lossy(config)
            if not skip and lossy and not facts.allow_lossy:
                skip = "lossy (the model drifts from the default's); --allow-lossy measures it"
            out.append(Candidate(config, lossy, "skipped" if skip else "active", skip))
    return out


def _values(knob: str, facts: Facts) -> list[tuple[Any, str]]:
    """The values of one knob the first stage tries, each with why it is left out ("": not)."""
    if knob == "bucket_cap_mb":
        return [(size, "") for size in bucket_sizes(facts.gradient_bytes)]
    if knob == "static_graph":
        return [(True, f"{facts.varying} are unused in some steps" if facts.varying else "")]
    if knob == "zero1":
        several = min(facts.worlds) >= 2
        return [(True, "" if several else "one process: nothing to shard the state over")]
    if knob == "comm_hook":
        return [(hook, _hook_refused(hook, facts)) for hook in ("fp16", "bf16", "powersgd")]
    if knob == "reshard_after_forward":
        return [(False, "")]
    if knob == "shard_units":
        return [("model", "")]
    if knob == "accum_steps":
        return [(k, "") for k in splits(facts.batch_size, facts.worlds)]
    return [(True, "")]  # gradient_as_bucket_view, compile


def _hook_refused(hook: str, facts: Facts) -> str:
    """Why a communication hook is left out for this model and backend ("" when it is not)."""
    if facts.sparse:
        # the hooks compress dense buckets: a sparse gradient fails in them (fp16 on gloo:
        # "cadd_sparse" not implemented)
        return f"sparse gradients ({facts.sparse}): the hooks compress dense buckets only"
    if hook == "bf16" and facts.backend != "nccl":
        return f"bf16_compress_hook needs NCCL, not {facts.backend}"
    if hook == "powersgd" and facts.varying:
        # dpwise's branching trap model with PowerSGD on gloo: a NaN loss at step 5 in `train`,
        # gloo's "Received data size doesn't match expected size" abort in a search
        return (
            f"{facts.varying} get no gradient in some steps, where PowerSGD went NaN or aborted "
            "in dpwise's tests"
        )
    return ""


def combinations(
    done: list[Candidate], allow_lossy: bool, backend: str = "nccl"
) -> list[dict[str, Any]]:
    """The second stage: the best value of each knob that won alone, together; with
    --allow-lossy also the best lossy winner joined with them. Only combinations not measured."""
    best: dict[str, Candidate] = {}
    for c in done:
        (knob,) = c.config
        if knob not in best or _median(c) > _median(best[knob]):
            best[knob] = c
    lossless = {k: c.config[k] for k, c in best.items() if not c.lossy}
    out = []
    if len(lossless) >= 2:
        out.append(dict(lossless))
    lossy = [c for c in best.values() if c.lossy]
    if allow_lossy and lossy and lossless:
        joined = {**lossless, **lossy[0].config}
        if joined.get("comm_hook") == "powersgd" and backend == "gloo":
            joined.pop("bucket_cap_mb", None)  # PowerSGD on gloo keeps one bucket (ddp.py)
        if len(joined) >= 2:
            out.append(joined)
    return out


def _median(c: Candidate) -> float:
    ratios = sorted(d / s for d, s in c.pairs if s > 0)
    return ratios[len(ratios) // 2] if ratios else 0.0
