"""The guide's claims (and FSDP's documented memory saving), each answered from the measured
runs and the checks' results: a typed Claim whose verdict is one of four words."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpwise.compare.checks import COMMUNICATION, MEMORY, SCALABILITY, Check
from dpwise.compare.checks.base import clearly_faster, median_rate
from dpwise.compare.checks.communication import stalled
from dpwise.compare.checks.thresholds import (
    EXPOSED_SHARE_LIMIT,
    FSDP_LESS_MEMORY,
    HALF_MEMORY,
    NEAR_LINEAR,
)
from dpwise.infra.units import mib, pct, sci
from dpwise.results.filters import one_process_many_devices, one_process_per_device
from dpwise.results.records import CheckResult, Claim, ClaimVerdict, Run

GUIDE = "guide"


def _claim(claim: str, source: str, measured: str, verdict: ClaimVerdict, why: str = "") -> Claim:
    return Claim(claim, source, measured, verdict, why)


def claims(
    runs: list[Run],
    checks: Mapping[Check, CheckResult],
    env: dict[str, Any],
    dp_vs_ddp: float | None,
) -> list[Claim]:
    """The guide's claims, and FSDP's documented memory saving where fsdp and ddp ran at one
    world size; a claim a check measures reads that check's result (by registry)."""
    gpus = env["gpus"] if env["device_type"] == "cuda" else 0
    sharding = _fsdp_memory_claim(checks[MEMORY])
    return [
        _memory_claim(checks[MEMORY], env),
        *([sharding] if sharding else []),
        _faster_claim(runs, gpus),
        _linear_claim(checks[SCALABILITY], gpus),
        _plateau_claim(gpus),
        _agree_claim(dp_vs_ddp, env["device_type"] == "cpu"),
        _async_claim(checks[COMMUNICATION]),
        _sync_points_claim(runs, gpus),
    ]


def _memory_claim(check: CheckResult, env: dict[str, Any]) -> Claim:
    text, src = "DDP uses ≈ 50 % less memory than DataParallel", f"{GUIDE}: Trade-Off Summary"
    ratio = check.figures.get("ddp_over_dp")
    if env["device_type"] == "cpu":
        why = "on the CPU DataParallel is a pass-through (the single-process run)"
        return _claim(text, src, "–", "cannot be tested", why)
    if ratio is None:
        return _claim(text, src, "–", "cannot be tested", "no dp and ddp run of the same size")
    held: ClaimVerdict = "held" if ratio <= HALF_MEMORY else "did not hold"
    return _claim(text, src, f"DDP / DP peak per device = {ratio:.2f}", held)


FSDP_SOURCE = "PyTorch FSDP docs (fully_shard); ZeRO, Rajbhandari et al. 2020"


def _fsdp_memory_claim(check: CheckResult) -> Claim | None:
    """FSDP against DDP at one world size (the memory check's figures), None when not both ran."""
    f = check.figures
    if f.get("fsdp_over_ddp") is None:
        return None
    ratio, w = f["fsdp_over_ddp"], f.get("fsdp_vs_ddp_world_size")
    less = ratio < FSDP_LESS_MEMORY
    measured = (
        f"FSDP / DDP peak per process at {w} processes = {ratio:.3f} "
        f"(FSDP {mib(f['fsdp_peak_bytes'])}, DDP {mib(f['ddp_peak_bytes'])})"
    )
    gap = mib(abs(f["ddp_peak_bytes"] - f["fsdp_peak_bytes"]))
    why = (
        f"sharding saved {gap} per process: parameters, gradients and optimizer state are "
        "split over the processes, activations are not"
        if less
        else f"FSDP's peak was {gap} above DDP's: its gathered units cost more than sharding "
        "saved (see the memory check)"
    )
    held: ClaimVerdict = "held" if less else "did not hold"
    if f.get("fsdp_within_one_gradient_copy"):
        why += "; the gap is under one copy of the gradients, within a peak's run-to-run spread"
        held = "not measurable here"
    return _claim("FSDP needs less memory per device than DDP", FSDP_SOURCE, measured, held, why)


def _faster_claim(runs: list[Run], gpus: int) -> Claim:
    text = "DDP finishes faster than DataParallel, especially on > 4 GPUs"
    src = f"{GUIDE}: Validation Checklist 3"
    dp = {r.world_size: r for r in one_process_many_devices(runs)}
    ddp = {r.world_size: r for r in one_process_per_device(runs)}
    common = sorted((set(dp) & set(ddp)) - {1})
    if gpus == 0:
        return _claim(text, src, "–", "cannot be tested", "no GPU: DataParallel is a pass-through")
    if not common:
        return _claim(
            text, src, "–", "cannot be tested", "no dp and ddp run on 2+ GPUs of one size"
        )
    w = common[-1]
    ratio = median_rate(ddp[w]) / median_rate(dp[w])
    why = "" if gpus > 4 else f"only {gpus} GPU(s): the '> 4 GPUs' part cannot be tested"
    held: ClaimVerdict = "held" if clearly_faster(ddp[w], dp[w]) else "did not hold"
    return _claim(text, src, f"at {w} GPUs DDP / DP throughput = {ratio:.2f}", held, why)


def _linear_claim(check: CheckResult, gpus: int) -> Claim:
    text, src = "DDP scales almost linearly with GPU count", f"{GUIDE}: Trade-Off Summary"
    eff = check.figures.get("efficiency") or {}
    if gpus < 2 or len(eff) < 2:
        seen = ", ".join(f"{w}: {pct(e)}" for w, e in eff.items()) or "–"
        why = "fewer than 2 GPUs" if gpus < 2 else "ddp ran at fewer than two world sizes"
        where = "CPU efficiency" if gpus == 0 else "efficiency"
        return _claim(text, src, f"{where} {seen}", "cannot be tested", why)
    w = max(eff)
    held: ClaimVerdict = "held" if eff[w] >= NEAR_LINEAR else "did not hold"
    return _claim(text, src, f"efficiency at {w} GPUs = {pct(eff[w])}", held)


def _plateau_claim(gpus: int) -> Claim:
    text, src = "DataParallel saturates around 4 GPUs", f"{GUIDE}: Trade-Off Summary"
    if gpus < 5:
        return _claim(text, src, "–", "cannot be tested", f"needs more than 4 GPUs; found {gpus}")
    return _claim(text, src, "see the throughput plot", "cannot be tested", "not yet automated")


def _agree_claim(dp_vs_ddp: float | None, cpu: bool) -> Claim:
    text = "DP and DDP parameters agree within 1e-4 after training"
    src = f"{GUIDE}: Validation Checklist 1"
    if dp_vs_ddp is None:
        return _claim(text, src, "no dp and ddp runs", "cannot be tested")
    if not math.isfinite(dp_vs_ddp):
        why = "a dp or ddp run diverged (a non-finite loss): see the convergence check"
        return _claim(text, src, "parameters not finite", "cannot be tested", why)
    held: ClaimVerdict = "held" if dp_vs_ddp <= 1e-4 else "did not hold"
    why = "dpwise gives both the same batches, order, initial state and a mean-reduced loss"
    if cpu:
        why += "; on the CPU DataParallel is a pass-through, so this compares single with DDP"
    return _claim(text, src, f"max |Δparam| between dp and ddp = {sci(dp_vs_ddp)}", held, why)


def _async_claim(check: CheckResult) -> Claim:
    text = "DDP communicates asynchronously, so steps are not stalled by gradient sync"
    src = f"{GUIDE}: DistributedDataParallel"
    figures = check.figures
    if not figures:
        return _claim(text, src, "–", "cannot be tested", "no ddp run with 2 or more processes")
    run_id, comm = max(figures.items(), key=lambda kv: int(kv[0].rpartition("-")[2] or 0))
    if run_id.endswith("-1"):
        return _claim(text, src, "–", "cannot be tested", "no ddp run with 2 or more processes")
    share = comm.get("exposed_share")
    if share is None:  # a user's script: its loop is its own, the paired steps are not run
        return _claim(text, src, "–", "cannot be tested", "exposed time not measured in a script")
    held: ClaimVerdict = "did not hold" if stalled(share) else "held"
    why = (
        "all-reduce overlaps the rest of backward, but the step waits for the last bucket; "
        f"below {pct(EXPOSED_SHARE_LIMIT)} of the step exposed, the same limit as the "
        "communication check, the communication counts as hidden"
    )
    return _claim(
        text, src, f"{run_id}: {pct(share)} of the step is exposed communication", held, why
    )


def _sync_points_claim(runs: list[Run], gpus: int) -> Claim:
    text = "DDP registers fewer CPU-bound sync points than DataParallel"
    src = f"{GUIDE}: Validation Checklist 4"
    if not gpus:
        return _claim(text, src, "–", "cannot be tested", "device sync points exist only on GPUs")
    dp = {r.world_size: r for r in one_process_many_devices(runs)}
    ddp = {r.world_size: r for r in one_process_per_device(runs)}
    common = sorted(w for w in set(dp) & set(ddp) if w > 1)
    if not common:
        return _claim(
            text, src, "–", "cannot be tested", "no dp and ddp run on 2+ GPUs of one size"
        )
    w = common[-1]
    a, b = ddp[w].sync_points_per_step, dp[w].sync_points_per_step
    if a is None or b is None:
        return _claim(text, src, "–", "cannot be tested", "the profiler recorded no sync points")
    held: ClaimVerdict = "held" if a < b else "did not hold"
    return _claim(text, src, f"sync points per step: DDP {a:.1f}, DP {b:.1f}", held)
