"""Check 2, memory: peak per device, the DDP / DataParallel ratio and device-0 imbalance (GPUs),
and FSDP's peak per process against DDP's at the same world size (CPU and GPU).

What it finds is data (a MemoryFinding of two comparisons); checks/text.py says it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dpwise.compare.checks.base import CheckContext, Finding, peak
from dpwise.compare.checks.thresholds import FSDP_LESS_MEMORY, HALF_MEMORY
from dpwise.infra.units import gib, mib
from dpwise.results.filters import one_process_many_devices, one_process_per_device, sharded
from dpwise.results.records import CheckStatus, Json, Run

NAME = "memory"

Unmeasured = Literal["cpu", "no_pair"]  # why a comparison was not measured here


@dataclass(frozen=True)
class DpVsDdp:
    """The guide's claim: DDP's peak per device against DataParallel's (GPUs only)."""

    dp: Run
    ddp: Run
    ratio: float  # ddp / dp, the busiest device of each
    imbalance: float | None  # DataParallel's device 0 against the mean of the others
    held: bool


@dataclass(frozen=True)
class FsdpVsDdp:
    """A sharded run (FSDP) against a replicated one (DDP) of the same world size."""

    fsdp: Run
    ddp: Run
    ratio: float  # fsdp / ddp, the busiest process of each
    gradients: int | None  # one copy of the gradients in bytes, as the probe counted
    close: bool  # the peaks differ by less than one copy of the gradients
    held: bool  # a saving that can be measured


@dataclass(frozen=True, kw_only=True)
class MemoryFinding(Finding):
    runs: tuple[Run, ...]
    dp: DpVsDdp | Unmeasured
    fsdp: FsdpVsDdp | Unmeasured | None  # None: no sharded run was asked for


def find(ctx: CheckContext) -> MemoryFinding:
    runs = list(ctx.runs)
    kind = runs[0].memory.kind
    figures: Json = {"kind": kind, "peaks": {r.id: peak(r) for r in runs}}
    dp = "cpu" if ctx.device_type == "cpu" else _dp_vs_ddp(runs)
    fsdp = _fsdp_vs_ddp(runs)
    measured = [p for p in (dp, fsdp) if p is not None and not isinstance(p, str)]
    for part in measured:
        figures.update(_figures(part))
    statuses: list[CheckStatus] = ["pass" if p.held else "warn" for p in measured]
    status: CheckStatus = ("warn" if "warn" in statuses else "pass") if measured else "skip"
    return MemoryFinding(
        status=status,
        figures=figures,
        table={"columns": ["run", "device", f"peak ({kind})", "peak RSS"], "rows": _rows(runs)},
        plot="memory.png",
        runs=tuple(runs),
        dp=dp,
        fsdp=fsdp,
    )


def _dp_vs_ddp(runs: list[Run]) -> DpVsDdp | Unmeasured:
    dp, ddp = _pair(one_process_many_devices(runs), one_process_per_device(runs), smallest=2)
    if dp is None or ddp is None or not peak(dp):
        return "no_pair"
    ratio = peak(ddp) / peak(dp)
    return DpVsDdp(dp, ddp, ratio, _imbalance(dp), ratio <= HALF_MEMORY)


def _fsdp_vs_ddp(runs: list[Run]) -> FsdpVsDdp | Unmeasured | None:
    shards = sharded(runs)
    if not shards:
        return None
    ddp, fsdp = _pair(one_process_per_device(runs), shards, smallest=2)
    if ddp is None or fsdp is None or not peak(ddp) or not peak(fsdp):
        return "no_pair"
    ratio = peak(fsdp) / peak(ddp)
    gradients = _gradient_bytes(fsdp)
    close = bool(gradients) and abs(peak(ddp) - peak(fsdp)) < (gradients or 0)
    return FsdpVsDdp(fsdp, ddp, ratio, gradients, close, ratio < FSDP_LESS_MEMORY and not close)


def _figures(part: DpVsDdp | FsdpVsDdp) -> Json:
    if isinstance(part, DpVsDdp):
        return {"ddp_over_dp": part.ratio, "dp_device0_imbalance": part.imbalance}
    return {
        "ddp_peak_bytes": peak(part.ddp),
        "fsdp_within_one_gradient_copy": part.close,
        "fsdp_peak_bytes": peak(part.fsdp),
        "fsdp_over_ddp": part.ratio,
        "fsdp_vs_ddp_world_size": part.fsdp.world_size,
        "fsdp_run": part.fsdp.id,
        "ddp_run": part.ddp.id,
    }


def _gradient_bytes(run: Run) -> int | None:
    """The run's trainable parameter bytes (one copy of its gradients), as its probe counted."""
    return (run.communication or {}).get("gradient_bytes")


def _rows(runs: list[Run]) -> list[list[str]]:
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
