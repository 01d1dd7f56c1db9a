"""The knobs `dpwise tune` searches, per strategy, and the candidates they make for one model.

A candidate is a configuration: the knobs it changes from the default, by their TrainConfig
names (``accum_steps``: the global batch split into that many micro-batches). Knobs the backend
or the model cannot take are kept with the reason, never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.strategies.ddp import one_bucket_mb

DDP_DEFAULT_BUCKET_MB = 25.0  # DistributedDataParallel's bucket_cap_mb


@dataclass(frozen=True)
class Knob:
    name: str
    strategies: tuple[str, ...]
    summary: str
    lossy: bool = False


KNOBS = {
    k.name: k
    for k in (
        Knob("bucket_cap_mb", ("ddp",), "gradient bucket size (DDP's default: 25 MB)"),
        Knob("gradient_as_bucket_view", ("ddp",), "gradients as views into the buckets"),
        Knob("static_graph", ("ddp",), "the same parameters used in every step"),
        Knob("comm_hook", ("ddp",), "gradient compression: fp16, bf16 (NCCL), PowerSGD", True),
        Knob("zero1", ("ddp",), "optimizer state sharded (ZeroRedundancyOptimizer)"),
        Knob("reshard_after_forward", ("fsdp",), "False: keep units gathered until backward"),
        Knob("shard_units", ("fsdp",), "model: the whole model as one unit"),
        Knob("accum_steps", ("ddp", "fsdp"), "micro-batch × accumulation of the global batch"),
        Knob("compile", ("ddp", "fsdp"), "torch.compile (with --compile)"),
    )
}


def knob_help() -> str:
    return "; ".join(f"{k.name} ({'/'.join(k.strategies)})" for k in KNOBS.values())


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


@dataclass
class Candidate:
    config: dict[str, Any]
    lossy: bool = False
    state: str = "active"  # active, done, pruned, rejected, failed, skipped
    reason: str = ""
    stage: int = 1
    pairs: list[list[float]] = field(default_factory=list)  # [default s, candidate s] by round
    totals: list[float] = field(default_factory=list)  # whole trainings, seconds
    peak_memory: int | None = None
    drift: dict[str, Any] | None = None
    equivalent: bool | None = None

    @property
    def name(self) -> str:
        return name_of(self.config)

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config,
            "lossy": self.lossy,
            "state": self.state,
            "reason": self.reason,
            "stage": self.stage,
            "pairs": self.pairs,
            "totals": self.totals,
            "peak_memory": self.peak_memory,
            "drift": self.drift,
            "equivalent": self.equivalent,
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Candidate:
        return cls(**raw)


def name_of(config: dict[str, Any]) -> str:
    if not config:
        return "default"
    return " + ".join(
        k if v is True else f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
        for k, v in sorted(config.items())
    )


def is_lossy(config: dict[str, Any]) -> bool:
    return config.get("comm_hook", "none") != "none"


def chosen_knobs(facts: Facts) -> tuple[str, ...]:
    """The knobs to search: --knobs (each checked), else every knob of the strategy."""
    own = [k.name for k in KNOBS.values() if facts.strategy in k.strategies]
    if facts.knobs is None:
        return tuple(k for k in own if k != "compile" or facts.compile)
    for name in facts.knobs:
        if name in own:
            continue
        if name in KNOBS:
            takers = " or ".join(KNOBS[name].strategies)
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
    mb = gradient_bytes / 2**20
    sizes = []
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

    def add(config: dict[str, Any], skip: str = "") -> None:
        lossy = is_lossy(config)
        if not skip and lossy and not facts.allow_lossy:
            skip = "lossy (the model drifts from the default's); --allow-lossy measures it"
        out.append(Candidate(config, lossy, "skipped" if skip else "active", skip))

    several = min(facts.worlds) >= 2
    for knob in chosen_knobs(facts):
        if knob == "bucket_cap_mb":
            for size in bucket_sizes(facts.gradient_bytes):
                add({knob: size})
        elif knob in ("gradient_as_bucket_view", "compile"):
            add({knob: True})
        elif knob == "static_graph":
            add({knob: True}, f"{facts.varying} are unused in some steps" if facts.varying else "")
        elif knob == "zero1":
            add({knob: True}, "" if several else "one process: nothing to shard the state over")
        elif knob == "comm_hook":
            for hook in ("fp16", "bf16", "powersgd"):
                add({knob: hook}, _hook_refused(hook, facts))
        elif knob == "reshard_after_forward":
            add({knob: False})
        elif knob == "shard_units":
            add({knob: "model"})
        elif knob == "accum_steps":
            for k in splits(facts.batch_size, facts.worlds):
                add({knob: k})
    return out


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
