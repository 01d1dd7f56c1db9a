"""Check 2, memory: peak per device, the DDP / DataParallel ratio and device-0 imbalance."""

from __future__ import annotations

from typing import Any

from dpwise.checks.base import CheckResult, Run, peak
from dpwise.units import gib, mib


def memory(runs: list[Run], device_type: str) -> CheckResult:
    kind = runs[0]["memory"]["kind"]
    table = {"columns": ["run", "device", f"peak ({kind})", "peak RSS"], "rows": _memory_rows(runs)}
    dp, ddp = _pair_for_memory(runs)
    figures: dict[str, Any] = {"kind": kind, "peaks": {r["id"]: peak(r) for r in runs}}
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
    ratio = peak(ddp) / peak(dp) if peak(dp) else None
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
