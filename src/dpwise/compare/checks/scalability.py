"""Check 5, scalability: ddp's throughput and scaling efficiency across world sizes."""

from __future__ import annotations

from dpwise.compare.checks.base import Check, CheckContext, median_rate
from dpwise.compare.checks.contention import impossible, impossible_text
from dpwise.compare.checks.thresholds import SCALING_FLOOR
from dpwise.infra.units import pct, rate
from dpwise.results.filters import one_process_per_device
from dpwise.results.records import CheckResult, Run

NAME = "scalability"


def evaluate(ctx: CheckContext) -> CheckResult:
    runs, device_type, cores = list(ctx.runs), ctx.device_type, ctx.cpu_cores
    # the guide's claim is DDP's: a strategy that shards the model is another curve
    ddp = sorted(one_process_per_device(runs), key=lambda r: r.world_size)
    rows = [
        [
            str(r.world_size),
            rate(median_rate(r)),
            f"{r.speedup_vs_single:.2f}×",
            pct(r.speedup_vs_single / r.world_size),
            str(r.threads_per_process),
        ]
        for r in ddp
    ]
    table = {
        "columns": ["world size", "samples/s", "speed-up", "efficiency", "threads/process"],
        "rows": rows,
    }
    sizes = [r.world_size for r in ddp]
    if len(sizes) < 2:
        return CheckResult(
            NAME,
            "skip",
            "needs ddp at two or more world sizes",
            "Give --world-sizes with at least two sizes (e.g. 1,2).",
            {},
            table,
            "throughput.png",
        )
    peak = max(ddp, key=median_rate)
    eff = {r.world_size: r.speedup_vs_single / r.world_size for r in ddp}
    top = ddp[-1]
    note = (
        f"Each process had {top.threads_per_process} of the {cores} CPU cores; the single "
        f"process used {runs[0].threads_per_process}. On one CPU the processes share the same "
        "cores, so the ideal speed-up is about 1×, not the world size."
        if device_type == "cpu"
        else "Each process drives one GPU."
    )
    contended = [(r, b) for r, b in impossible(runs, device_type, cores) if r in ddp]
    if contended:
        return CheckResult(
            NAME,
            "warn",
            f"contention, not scaling: {impossible_text(contended, cores)}",
            "Scaling efficiency is the speed-up against single divided by the world size. On one "
            f"CPU the processes share its {cores} cores, so no efficiency can be well above "
            "100 %: these figures come from other processes slowing the multi-threaded single "
            "run more than the one-thread workers. Measure again on a quiet machine. " + note,
            {"efficiency": eff, "stops_growing_at": peak.world_size, "contention": True},
            table,
            "throughput.png",
        )
    return CheckResult(
        NAME,
        _scaling_status(top, eff[top.world_size], device_type),
        f"throughput peaks at world size {peak.world_size}; efficiency at "
        f"{top.world_size}: {pct(eff[top.world_size])}",
        f"Scaling efficiency is the speed-up against single divided by the world size. {note}",
        {"efficiency": eff, "stops_growing_at": peak.world_size},
        table,
        "throughput.png",
    )


def _scaling_status(top: Run, efficiency: float, device_type: str) -> str:
    """GPUs: efficiency ≥ 70 %. One CPU: the ideal is about 1× single, so the largest world size
    should keep at least 70 % of single's throughput."""
    if device_type == "cpu":
        return "pass" if top.speedup_vs_single >= SCALING_FLOOR else "warn"
    return "pass" if efficiency >= SCALING_FLOOR else "warn"


SCALABILITY = Check(NAME, evaluate)
