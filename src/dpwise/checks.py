"""The guide's five validation checks: measurements in, CheckResult out. No measuring here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from dpwise.units import gib, mib, pct, rate, sci

Run = dict[str, Any]


@dataclass
class CheckResult:
    name: str
    status: str  # pass | fail | warn | skip
    summary: str
    explanation: str
    figures: dict[str, Any] = field(default_factory=dict)
    table: dict[str, Any] = field(default_factory=lambda: {"columns": [], "rows": []})
    plot: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Diagnosis:
    """What in the model or set-up can make parallel runs differ from the single process."""

    batchnorm: list[str]
    dropout: list[str]
    loss_reduction: str
    uneven: list[str]  # runs whose global batch does not split evenly


def _peak(run: Run) -> int:
    return max((d["peak_bytes"] or 0) for d in run["memory"]["per_device"])


def _median_rate(run: Run) -> float:
    return run["samples_per_s"]["median"]


def convergence(runs: list[Run], tolerance: float, why: Diagnosis) -> CheckResult:
    others = [r for r in runs if r["id"] != "single"]
    diffs = {r["id"]: r["max_param_diff_vs_single"] for r in others}
    worst = max(diffs.values(), default=0.0)
    rows = [
        [r["label"], sci(r["max_param_diff_vs_single"]), f"{r['losses'][-1]:.4f}"]
        for r in runs
        if r["losses"]
    ]
    table = {"columns": ["run", "max |Δparam| vs single", "final loss"], "rows": rows}
    figures = {"tolerance": tolerance, "max_diff": diffs}
    if worst <= tolerance:
        return CheckResult(
            "convergence",
            "pass",
            f"every run ends within {sci(worst)} of the single-process parameters "
            f"(tolerance {sci(tolerance)})",
            "All runs trained on the same global batches in the same order from the same initial "
            "weights with a mean-reduced loss, so their parameters agree to floating-point "
            "rounding: the strategies are interchangeable for this model.",
            figures,
            table,
            "loss.png",
        )
    failing = [r["label"] for r in others if r["max_param_diff_vs_single"] > tolerance]
    return CheckResult(
        "convergence",
        "fail",
        f"{', '.join(failing)} differ from single by up to {sci(worst)} "
        f"(tolerance {sci(tolerance)})",
        explain_divergence(why, failing),
        figures,
        table,
        "loss.png",
    )


def explain_divergence(why: Diagnosis, failing: list[str]) -> str:
    causes = []
    if why.batchnorm:
        causes.append(
            f"BatchNorm layers ({', '.join(why.batchnorm)}) normalise with the statistics of each "
            "device's share of the batch, not of the global batch. Fix: for ddp convert them with "
            "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) (DataParallel cannot sync them), "
            "or compare with the BatchNorm layers in eval mode."
        )
    if why.dropout:
        causes.append(
            f"Dropout ({', '.join(why.dropout)}) draws different masks per device. Fix: compare "
            "with dropout disabled (p=0 or eval mode)."
        )
    if why.loss_reduction != "mean":
        causes.append(
            f"the loss is {why.loss_reduction}-reduced, so DDP's gradient average does not equal "
            "the global gradient. Fix: use reduction='mean'."
        )
    if why.uneven:
        causes.append(
            f"the global batch does not split evenly in {', '.join(why.uneven)}. Fix: a batch "
            "size divisible by every world size (an aligned partition)."
        )
    if not causes:
        causes.append(
            "no known cause was found in the model (no BatchNorm, Dropout, sum-reduced loss or "
            "uneven split): look for other per-process randomness or non-deterministic kernels."
        )
    return f"{', '.join(failing)} did not reproduce the single-process run. " + " ".join(causes)


def memory(runs: list[Run], device_type: str) -> CheckResult:
    kind = runs[0]["memory"]["kind"]
    table = {"columns": ["run", "device", f"peak ({kind})", "peak RSS"], "rows": _memory_rows(runs)}
    dp, ddp = _pair_for_memory(runs)
    figures: dict[str, Any] = {"kind": kind, "peaks": {r["id"]: _peak(r) for r in runs}}
    if dp is None or ddp is None:
        return CheckResult(
            "memory",
            "skip",
            "no DataParallel and DDP run to compare",
            "Run both dp and ddp (--strategies single,dp,ddp) to compare their peak memory.",
            figures,
            table,
            "memory.png",
        )
    ratio = _peak(ddp) / _peak(dp) if _peak(dp) else None
    figures["ddp_over_dp"] = ratio
    figures["dp_device0_imbalance"] = _imbalance(dp)
    held = ratio is not None and ratio <= 0.6
    imbalance = figures["dp_device0_imbalance"]
    skew = (
        "" if imbalance is None else f"; DataParallel's device 0 holds {imbalance:.2f}× the others"
    )
    where = (
        "On the CPU DataParallel is a pass-through, so 'dp' is one process holding everything; "
        "each DDP process holds the parameters, gradients, optimizer state and DDP's bucket "
        "buffers "
        "(about one more copy of the gradients)."
        if device_type == "cpu"
        else "DataParallel keeps the master parameters, gradients, optimizer state and the "
        "gathered outputs on device 0; each DDP process holds parameters, gradients, optimizer "
        "state and bucket buffers on its own GPU."
    )
    return CheckResult(
        "memory",
        "pass" if held else "warn",
        f"peak per device: {ddp['label']} / {dp['label']} = {ratio:.2f}: the guide's "
        f"'≈ 50 % less' {'held' if held else 'did not hold'} here{skew}",
        f"{where} Measured as {kind}; the ratio compares the busiest device of each run.",
        figures,
        table,
        "memory.png",
    )


def _memory_rows(runs: list[Run]) -> list[list[str]]:
    rows = []
    for r in runs:
        devices, rss = r["memory"]["per_device"], r["memory"]["peak_rss_bytes"]
        for d in devices:
            where = d["device"] if len(devices) == 1 else f"{d['device']} (rank {d['rank']})"
            rows.append(
                [r["label"], where, mib(d["peak_bytes"]), gib(rss[min(d["rank"], len(rss) - 1)])]
            )
    return rows


def _pair_for_memory(runs: list[Run]) -> tuple[Run | None, Run | None]:
    dps = [r for r in runs if r["strategy"] == "dp"]
    ddps = [r for r in runs if r["strategy"] == "ddp"]
    if not dps or not ddps:
        return None, None
    dp = max(dps, key=lambda r: r["world_size"])
    same = [r for r in ddps if r["world_size"] == dp["world_size"]]
    return dp, (same or [max(ddps, key=lambda r: r["world_size"])])[0]


def _imbalance(dp: Run) -> float | None:
    peaks = [d["peak_bytes"] or 0 for d in dp["memory"]["per_device"]]
    if len(peaks) < 2 or not sum(peaks[1:]):
        return None
    return peaks[0] / (sum(peaks[1:]) / len(peaks[1:]))


def speed(runs: list[Run], repeats: int) -> CheckResult:
    rows = [
        [
            r["label"],
            f"{r['epoch_seconds']['median']:.3f}",
            f"{r['epoch_seconds']['min']:.3f}–{r['epoch_seconds']['max']:.3f}",
            rate(_median_rate(r)),
            f"{r['speedup_vs_single']:.2f}×",
        ]
        for r in runs
    ]
    table = {
        "columns": ["run", "epoch s (median)", "spread (min–max)", "samples/s", "speed-up"],
        "rows": rows,
    }
    real = [r for r in runs if not r["notes"]]  # a CPU pass-through is the single run again
    best = max(real or runs, key=_median_rate)
    parallel = [r for r in real if r["id"] != "single"]
    faster = [r for r in parallel if r["speedup_vs_single"] > 1.0]
    status = "pass" if faster or not parallel else "warn"
    return CheckResult(
        "speed",
        status,
        f"fastest: {best['label']} at {rate(_median_rate(best))} samples/s "
        f"({best['speedup_vs_single']:.2f}× single)",
        f"Epoch wall time is the median of {repeats} repeats, each a full training from the same "
        "initial state whose first epoch is an untimed warm-up; the spread is the fastest and "
        "slowest repeat. "
        + (
            "A parallel run beat the single process."
            if faster
            else "No parallel run beat the single process on this hardware."
        ),
        {"fastest": best["id"], "speedup": {r["id"]: r["speedup_vs_single"] for r in runs}},
        table,
        "throughput.png",
    )


def communication(runs: list[Run]) -> CheckResult:
    measured = [r for r in runs if r["communication"] and "exposed_share" in r["communication"]]
    rows = []
    for r in measured:
        c = r["communication"]
        ops = {o["op"]: o for o in c["collectives"]}
        rows.append(
            [
                r["label"],
                f"{ops['all_reduce']['count_per_step']:.1f}",
                f"{ops['all_reduce']['ms_per_step']:.2f}",
                mib(c["bytes_all_reduced_per_step"]),
                mib(c["gradient_bytes"]),
                f"{c['exposed_ms']:.2f}",
                pct(c["exposed_share"]),
                "–"
                if r.get("sync_points_per_step") is None
                else f"{r['sync_points_per_step']:.1f}",
            ]
        )
    table = {
        "columns": [
            "run",
            "all-reduce/step",
            "all-reduce ms/step",
            "all-reduced/step",
            "gradients",
            "exposed ms/step",
            "exposed share",
            "sync points/step",
        ],
        "rows": rows,
    }
    if not measured:
        return CheckResult(
            "communication",
            "skip",
            "no DDP run to profile",
            "Include ddp in --strategies to profile its collectives.",
            {},
            table,
            None,
        )
    top = max(measured, key=lambda r: r["world_size"])
    c = top["communication"]
    full = abs(c["bytes_all_reduced_per_step"] - c["gradient_bytes"]) <= 0.05 * c["gradient_bytes"]
    heavy = c["exposed_share"] >= 0.5
    return CheckResult(
        "communication",
        "warn" if heavy or not full else "pass",
        f"{top['label']}: {mib(c['bytes_all_reduced_per_step'])} all-reduced per step for "
        f"{mib(c['gradient_bytes'])} of gradients; {pct(c['exposed_share'])} of the step is "
        "communication not hidden behind compute",
        "torch.profiler recorded the collectives of a few steady steps (traces open in Perfetto). "
        "DDP all-reduces gradient buckets during backward, overlapping the rest of backward; the "
        "exposed part is the time a synchronised step takes beyond the same step under no_sync, "
        "measured by alternating the two. "
        + (
            "Communication dominates the step here: fewer, larger steps (bigger batch or "
            "--accum-steps with no_sync) amortise it."
            if heavy
            else ""
        ),
        {r["id"]: r["communication"] for r in measured},
        table,
        "communication.png",
    )


def scalability(runs: list[Run], device_type: str, cores: int) -> CheckResult:
    ddp = sorted((r for r in runs if r["strategy"] == "ddp"), key=lambda r: r["world_size"])
    rows = [
        [
            str(r["world_size"]),
            rate(_median_rate(r)),
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
    peak = max(ddp, key=_median_rate)
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
        "pass" if eff[top["world_size"]] >= 0.7 else "warn",
        f"throughput peaks at world size {peak['world_size']}; efficiency at "
        f"{top['world_size']}: {pct(eff[top['world_size']])}",
        f"Scaling efficiency is the speed-up against single divided by the world size. {note}",
        {"efficiency": eff, "stops_growing_at": peak["world_size"]},
        table,
        "throughput.png",
    )
