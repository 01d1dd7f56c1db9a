"""Check 2, memory: peak per device, the DDP / DataParallel ratio and device-0 imbalance (GPUs),
and FSDP's peak per process against DDP's at the same world size (CPU and GPU)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dpwise.compare.checks.base import Check, CheckContext, peak
from dpwise.compare.checks.thresholds import FSDP_LESS_MEMORY, HALF_MEMORY
from dpwise.infra.units import gib, mib
from dpwise.results.filters import one_process_many_devices, one_process_per_device, sharded
from dpwise.results.records import CheckResult, Run

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
    parts = [p for p in (_dp_part(runs, device_type), _fsdp_part(runs)) if p is not None]
    measured = [p for p in parts if p.status is not None]
    ordered = measured + [p for p in parts if p.status is None]  # what was measured first
    for part in parts:
        figures.update(part.figures)
    status = "warn" if any(p.status == "warn" for p in measured) else "pass"
    return CheckResult(
        NAME,
        status if measured else "skip",
        ("" if measured else f"busiest device: {peaks}; ") + "; ".join(p.summary for p in ordered),
        " ".join(p.explanation for p in ordered) + " " + WINDOW,
        figures,
        table,
        "memory.png",
    )


@dataclass(frozen=True)
class _Part:
    """One comparison of the check: its status (None: not measured here) and its words."""

    status: str | None
    summary: str
    explanation: str
    figures: dict[str, Any] = field(default_factory=dict)


def _dp_part(runs: list[Run], device_type: str) -> _Part:
    """The guide's claim: DDP's peak per device against DataParallel's (GPUs only)."""
    if device_type == "cpu":
        return _Part(
            None,
            "DDP against DataParallel cannot be tested on the CPU",
            "On the CPU DataParallel is a pass-through (it is the single-process run), so the "
            "guide's comparison needs GPUs. Each DDP process holds the parameters, gradients, "
            "optimizer state and DDP's bucket buffers (about one more copy of the gradients).",
        )
    dp, ddp = _pair(one_process_many_devices(runs), one_process_per_device(runs), smallest=2)
    if dp is None or ddp is None or not peak(dp):
        return _Part(
            None,
            "no dp and ddp run of the same size",
            "Run dp and ddp at the same world size (--strategies single,dp,ddp) to compare them.",
        )
    ratio = peak(ddp) / peak(dp)
    imbalance = _imbalance(dp)
    held = ratio <= HALF_MEMORY
    skew = "" if imbalance is None else f"; DataParallel's device 0 holds {imbalance:.2f}× the rest"
    return _Part(
        "pass" if held else "warn",
        f"peak per device: {ddp.label} / {dp.label} = {ratio:.2f}: the guide's "
        f"'≈ 50 % less' {'held' if held else 'did not hold'} here{skew}",
        "DataParallel keeps the parameters, gradients, optimizer state and the gathered outputs "
        "on device 0; each DDP process holds parameters, gradients, optimizer state and bucket "
        "buffers on its own GPU. The ratio compares the busiest device of each run.",
        {"ddp_over_dp": ratio, "dp_device0_imbalance": imbalance},
    )


def _fsdp_part(runs: list[Run]) -> _Part | None:
    """A sharded run (FSDP) against a replicated one (DDP) of the same world size, on CPU and
    GPU alike; None when no sharded run was asked for."""
    shards = sharded(runs)
    if not shards:
        return None
    ddp, fsdp = _pair(one_process_per_device(runs), shards, smallest=2)
    if ddp is None or fsdp is None or not peak(ddp) or not peak(fsdp):
        return _Part(
            None,
            "no ddp run of a sharded run's world size",
            "Run ddp and fsdp at the same world size (--strategies single,ddp,fsdp) to compare "
            "their peaks per process.",
        )
    ratio = peak(fsdp) / peak(ddp)
    gradients = _gradient_bytes(fsdp)
    close = bool(gradients) and abs(peak(ddp) - peak(fsdp)) < gradients
    held = ratio < FSDP_LESS_MEMORY and not close  # a saving is one that can be measured
    verdict = (
        "needed less than DDP"
        if held
        else "no measurable difference from DDP"
        if close
        else "did not need less than DDP"
    )
    return _Part(
        "pass" if held else "warn",
        f"peak per process: {fsdp.label} {mib(peak(fsdp))}, {ddp.label} {mib(peak(ddp))} "
        f"({fsdp.label} / {ddp.label} = {ratio:.3f}): FSDP " + verdict,
        FSDP_EXPLANATION
        + _most_saved(gradients, fsdp.world_size)
        + ("" if held or close else FSDP_NO_SAVING)
        + (_close(gradients) if close else ""),
        {
            "ddp_peak_bytes": peak(ddp),
            "fsdp_within_one_gradient_copy": close,
            "fsdp_peak_bytes": peak(fsdp),
            "fsdp_over_ddp": ratio,
            "fsdp_vs_ddp_world_size": fsdp.world_size,
            "fsdp_run": fsdp.id,
            "ddp_run": ddp.id,
        },
    )


FSDP_EXPLANATION = (
    "FSDP shards the parameters, gradients and optimizer state: each of W processes keeps 1/W "
    "of them and all-gathers a unit's parameters only around its forward and backward (PyTorch's "
    "FSDP documentation; ZeRO stage 3, Rajbhandari et al. 2020), while each DDP process keeps "
    "whole copies plus its gradient buckets. Activations are the same in both (the same rows per "
    "process). FSDP's peak per process should therefore be below DDP's: the check passes when "
    "it is, comparing the busiest process of each run at the same world size."
)
FSDP_NO_SAVING = (
    " Here it was not: what sharding saved was less than what FSDP's gathered units cost. The "
    "saving grows with the share of memory the model state takes."
)


def _gradient_bytes(run: Run) -> int | None:
    """The run's trainable parameter bytes (one copy of its gradients), as its probe counted."""
    return (run.communication or {}).get("gradient_bytes")


def _most_saved(gradients: int | None, w: int) -> str:
    """The most sharding can save per process, from the trainable parameter bytes."""
    if not gradients:
        return ""
    return (
        f" Here the trainable parameters take {mib(gradients)}: over {w} processes sharding saves "
        f"at most {mib(gradients * (1 - 1 / w))} for each of the parameters, the gradients and "
        "each optimizer state per parameter."
    )


def _close(gradients: int) -> str:
    """The two peaks differ by less than one copy of the gradients."""
    return (
        f" The two peaks differ by less than one copy of the gradients ({mib(gradients)}), about "
        "what a run's own CPU peak varies between runs and ranks (which of gloo's asynchronous "
        "buffers are alive at the peak): read this as no measurable difference on this model."
    )


def _memory_rows(runs: list[Run]) -> list[list[str]]:
    rows = []
    for r in runs:
        devices, rss = r.memory.per_device, r.memory.peak_rss_bytes
        for d in devices:
            where = d.device if len(devices) == 1 else f"{d.device} (rank {d.rank})"
            rows.append([r.label, where, mib(d.peak_bytes), gib(rss[min(d.rank, len(rss) - 1)])])
    return rows


def _pair(a: list[Run], b: list[Run], smallest: int) -> tuple[Run | None, Run | None]:
    """A run of ``a`` and one of ``b`` at the largest world size both have (≥ ``smallest``)."""
    sizes = {r.world_size for r in a if r.world_size >= smallest} & {r.world_size for r in b}
    if not sizes:
        return None, None
    w = max(sizes)
    return next(r for r in a if r.world_size == w), next(r for r in b if r.world_size == w)


def _imbalance(dp: Run) -> float | None:
    peaks = [d.peak_bytes or 0 for d in dp.memory.per_device]
    if len(peaks) < 2 or not sum(peaks[1:]):
        return None
    return peaks[0] / (sum(peaks[1:]) / len(peaks[1:]))


MEMORY = Check(NAME, evaluate)
