"""Check 5, scalability: ddp's throughput and scaling efficiency across world sizes.

What it finds is data (a ScalabilityFinding); checks/text.py says it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpwise.compare.checks.base import CheckContext, Finding
from dpwise.compare.checks.contention import Contended, impossible
from dpwise.compare.checks.thresholds import SCALING_FLOOR
from dpwise.infra.units import pct, rate
from dpwise.results.filters import one_process_per_device
from dpwise.results.records import CheckStatus, Json, Run, Table

NAME = "scalability"
PLOT = "throughput.png"

Cause = Literal["too_few_sizes", "contention", "measured"]


@dataclass(frozen=True, kw_only=True)
class ScalabilityFinding(Finding):
    cause: Cause
    peak_size: int  # the world size of the highest throughput (0: too few sizes)
    top: Run | None  # the ddp run of the largest world size (None: too few sizes)
    efficiency: dict[int, float]  # speed-up over single / world size, by world size
    contended: tuple[Contended, ...]
    device_type: str
    cores: int
    single_threads: int | None  # the single run's threads


def find(ctx: CheckContext) -> ScalabilityFinding:
    runs, device_type, cores = list(ctx.runs), ctx.device_type, ctx.cpu_cores
    # the guide's claim is DDP's: a strategy that shards the model is another curve
    ddp = sorted(one_process_per_device(runs), key=lambda r: r.world_size)
    if len(ddp) < 2:
        return _finding(ctx, ddp, status="skip", figures={}, cause="too_few_sizes")
    peak = max(ddp, key=lambda r: r.median_rate)
    eff = {r.world_size: r.speedup / r.world_size for r in ddp}
    top = ddp[-1]
    figures: Json = {"efficiency": eff, "stops_growing_at": peak.world_size}
    contended = tuple(c for c in impossible(runs, device_type, cores) if c.run in ddp)
    if contended:
        return _finding(
            ctx, ddp, "warn", {**figures, "contention": True}, "contention", peak, contended
        )
    status = _scaling_status(top, eff[top.world_size], device_type)
    return _finding(ctx, ddp, status, figures, "measured", peak)


def _finding(
    ctx: CheckContext,
    ddp: list[Run],
    status: CheckStatus,
    figures: Json,
    cause: Cause,
    peak: Run | None = None,
    contended: tuple[Contended, ...] = (),
) -> ScalabilityFinding:
    return ScalabilityFinding(
        status=status,
        figures=figures,
        table=_table(ddp),
        plot=PLOT,
        cause=cause,
        peak_size=0 if peak is None else peak.world_size,
        top=ddp[-1] if peak is not None else None,
        efficiency=figures.get("efficiency", {}),
        contended=contended,
        device_type=ctx.device_type,
        cores=ctx.cpu_cores,
        single_threads=ctx.runs[0].threads_per_process,
    )


def _table(ddp: list[Run]) -> Table:
    rows = [
        [
            str(r.world_size),
            rate(r.median_rate),
            f"{r.speedup:.2f}×",
            pct(r.speedup / r.world_size),
            str(r.threads_per_process),
        ]
        for r in ddp
    ]
    columns = ["world size", "samples/s", "speed-up", "efficiency", "threads/process"]
    return {"columns": columns, "rows": rows}


def _scaling_status(top: Run, efficiency: float, device_type: str) -> CheckStatus:
    """GPUs: efficiency ≥ 70 %. One CPU: the ideal is about 1× single, so the largest world size
    should keep at least 70 % of single's throughput."""
    if device_type == "cpu":
        return "pass" if top.speedup >= SCALING_FLOOR else "warn"
    return "pass" if efficiency >= SCALING_FLOOR else "warn"
