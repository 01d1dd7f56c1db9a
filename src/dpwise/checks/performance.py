"""Checks 3 and 5, speed and scalability: throughput, speed-up and scaling efficiency."""

from __future__ import annotations

from dpwise.checks.base import CheckResult, Run, clearly_faster, median_rate, overlaps
from dpwise.units import pct, rate


def speed(runs: list[Run], repeats: int) -> CheckResult:
    rows = [
        [
            r["label"],
            f"{r['epoch_seconds']['median']:.3f}",
            f"{r['epoch_seconds']['min']:.3f}–{r['epoch_seconds']['max']:.3f}",
            rate(median_rate(r)),
            f"{r['speedup_vs_single']:.2f}×",
        ]
        for r in runs
    ]
    table = {
        "columns": ["run", "epoch s (median)", "spread (min–max)", "samples/s", "speed-up"],
        "rows": rows,
    }
    real = [r for r in runs if not r["notes"]]  # a CPU pass-through is the single run again
    best = max(real or runs, key=median_rate)
    parallel = [r for r in real if r["world_size"] > 1]
    faster = [r for r in parallel if clearly_faster(r, runs[0])]
    drift = drifted(runs)
    status = "pass" if (faster or not parallel) and not drift else "warn"
    verdict = (
        "A parallel run beat the single process by more than 5 % beyond the noise."
        if faster
        else "No parallel run clearly beat the single process on this hardware."
    )
    return CheckResult(
        "speed",
        status,
        f"fastest: {best['label']} at {rate(median_rate(best))} samples/s "
        f"({best['speedup_vs_single']:.2f}× single)"
        + (
            f"; {', '.join(drift)} should match single: the machine's speed drifted"
            if drift
            else ""
        ),
        f"Epoch wall time is the median of {repeats} repeats, each a full training from the same "
        f"initial state whose first epoch is an untimed warm-up; the spread is the fastest and "
        f"slowest repeat. {verdict}" + (DRIFT_NOTE if drift else ""),
        {
            "fastest": best["id"],
            "speedup": {r["id"]: r["speedup_vs_single"] for r in runs},
            "drift_suspected_in": drift,
        },
        table,
        "throughput.png",
    )


DRIFT_NOTE = (
    " A run on one process and one device does the same work as single (plus DDP's or "
    "DataParallel's overhead), yet its throughput differs from single's by more than 10 %: the "
    "machine's speed changed while the runs followed each other (other load, frequency scaling). "
    "Treat differences of that size as noise, or run again on a quiet machine."
)


def drifted(runs: list[Run]) -> list[str]:
    """Runs of world size 1 that should match single but differ by over 10 % beyond the spread."""
    single = runs[0]
    return [
        r["label"]
        for r in runs[1:]
        if r["world_size"] == 1
        and abs(r["speedup_vs_single"] - 1) > 0.10
        and not overlaps(r, single)
    ]


def scalability(runs: list[Run], device_type: str, cores: int) -> CheckResult:
    ddp = sorted((r for r in runs if r["strategy"] == "ddp"), key=lambda r: r["world_size"])
    rows = [
        [
            str(r["world_size"]),
            rate(median_rate(r)),
            f"{r['speedup_vs_single']:.2f}×",
            pct(r["speedup_vs_single"] / r["world_size"]),
            str(r["threads_per_process"]),
        ]
        for r in ddp
    ]
    table = {
        "columns": ["world size", "samples/s", "speed-up", "efficiency", "threads/process"],
        "rows": rows,
    }
    sizes = [r["world_size"] for r in ddp]
    if len(sizes) < 2:
        return CheckResult(
            "scalability",
            "skip",
            "needs ddp at two or more world sizes",
            "Give --world-sizes with at least two sizes (e.g. 1,2).",
            {},
            table,
            "throughput.png",
        )
    peak = max(ddp, key=median_rate)
    eff = {r["world_size"]: r["speedup_vs_single"] / r["world_size"] for r in ddp}
    top = ddp[-1]
    note = (
        f"Each process had {top['threads_per_process']} of the {cores} CPU cores; the single "
        f"process used {runs[0]['threads_per_process']}. On one CPU the processes share the same "
        "cores, so the ideal speed-up is about 1×, not the world size."
        if device_type == "cpu"
        else "Each process drives one GPU."
    )
    return CheckResult(
        "scalability",
        _scaling_status(top, eff[top["world_size"]], device_type),
        f"throughput peaks at world size {peak['world_size']}; efficiency at "
        f"{top['world_size']}: {pct(eff[top['world_size']])}",
        f"Scaling efficiency is the speed-up against single divided by the world size. {note}",
        {"efficiency": eff, "stops_growing_at": peak["world_size"]},
        table,
        "throughput.png",
    )


def _scaling_status(top: Run, efficiency: float, device_type: str) -> str:
    """GPUs: efficiency ≥ 70 %. One CPU: the ideal is about 1× single, so the largest world size
    should keep at least 70 % of single's throughput."""
    if device_type == "cpu":
        return "pass" if top["speedup_vs_single"] >= 0.7 else "warn"
    return "pass" if efficiency >= 0.7 else "warn"
