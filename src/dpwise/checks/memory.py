"""Check 2, memory: peak per device, the DDP / DataParallel ratio and device-0 imbalance."""

from __future__ import annotations

from typing import Any

from dpwise.checks.base import Check, CheckContext, CheckResult, peak
from dpwise.checks.thresholds import HALF_MEMORY
from dpwise.compare.records import Run
from dpwise.strategies import one_process_many_devices, one_process_per_device
from dpwise.units import gib, mib

WINDOW = (
    "CPU figures are the peak of live tensor memory recorded by torch.profiler from the model's "
    "construction (after the data set is built) through a few steps; CUDA figures are "
    "torch.cuda.max_memory_allocated over the first timed repeat (NCCL's own buffers are not "
    "included)."
)

NAME = "memory"


def evaluate(ctx: CheckContext) -> CheckResult:
    runs, device_type = list(ctx.runs), ctx.device_type
    kind = runs[0].memory.kind
    table = {"columns": ["run", "device", f"peak ({kind})", "peak RSS"], "rows": _memory_rows(runs)}
    figures: dict[str, Any] = {"kind": kind, "peaks": {r.id: peak(r) for r in runs}}
    peaks = ", ".join(f"{r.label} {mib(peak(r))}" for r in runs)
    if device_type == "cpu":
        return CheckResult(
            NAME,
            "skip",
            f"busiest device: {peaks}; DDP against DataParallel cannot be tested on the CPU",
            "On the CPU DataParallel is a pass-through (it is the single-process run), so the "
            "guide's comparison needs GPUs. Each DDP process holds the parameters, gradients, "
            "optimizer state and DDP's bucket buffers (about one more copy of the gradients). "
            + WINDOW,
            figures,
            table,
            "memory.png",
        )
    dp, ddp = _pair_for_memory(runs)
    if dp is None or ddp is None or not peak(dp):
        return CheckResult(
            NAME,
            "skip",
            f"busiest device: {peaks}; no dp and ddp run of the same size",
            "Run dp and ddp at the same world size (--strategies single,dp,ddp) to compare them. "
            + WINDOW,
            figures,
            table,
            "memory.png",
        )
    ratio = peak(ddp) / peak(dp)
    figures["ddp_over_dp"] = ratio
    figures["dp_device0_imbalance"] = imbalance = _imbalance(dp)
    held = ratio <= HALF_MEMORY
    skew = "" if imbalance is None else f"; DataParallel's device 0 holds {imbalance:.2f}× the rest"
    return CheckResult(
        NAME,
        "pass" if held else "warn",
        f"peak per device: {ddp.label} / {dp.label} = {ratio:.2f}: the guide's "
        f"'≈ 50 % less' {'held' if held else 'did not hold'} here{skew}",
        "DataParallel keeps the parameters, gradients, optimizer state and the gathered outputs "
        "on device 0; each DDP process holds parameters, gradients, optimizer state and bucket "
        "buffers on its own GPU. The ratio compares the busiest device of each run. " + WINDOW,
        figures,
        table,
        "memory.png",
    )


def _memory_rows(runs: list[Run]) -> list[list[str]]:
    rows = []
    for r in runs:
        devices, rss = r.memory.per_device, r.memory.peak_rss_bytes
        for d in devices:
            where = d.device if len(devices) == 1 else f"{d.device} (rank {d.rank})"
            rows.append([r.label, where, mib(d.peak_bytes), gib(rss[min(d.rank, len(rss) - 1)])])
    return rows


def _pair_for_memory(runs: list[Run]) -> tuple[Run | None, Run | None]:
    dps, ddps = one_process_many_devices(runs), one_process_per_device(runs)
    if not dps or not ddps:
        return None, None
    sizes = {r.world_size for r in dps if r.world_size > 1} & {r.world_size for r in ddps}
    if not sizes:
        return None, None
    w = max(sizes)
    return (
        next(r for r in dps if r.world_size == w),
        next(r for r in ddps if r.world_size == w),
    )


def _imbalance(dp: Run) -> float | None:
    peaks = [d.peak_bytes or 0 for d in dp.memory.per_device]
    if len(peaks) < 2 or not sum(peaks[1:]):
        return None
    return peaks[0] / (sum(peaks[1:]) / len(peaks[1:]))


MEMORY = Check(NAME, evaluate)
