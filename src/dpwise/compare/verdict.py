"""The recommendation (the runs weighed: Evidence, said by compare's text module) and the
guide's claims, each answered from the measured runs."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from dpwise.compare import text
from dpwise.compare.checks import COMMUNICATION, MEMORY, SCALABILITY, Check
from dpwise.compare.checks.base import (
    Comparison,
    clearly_faster,
    compare,
    diverged,
    median_rate,
    params_agree,
)
from dpwise.compare.checks.communication import stalled
from dpwise.compare.checks.contention import impossible, machine_load
from dpwise.compare.checks.speed import drifted
from dpwise.compare.checks.thresholds import (
    EXPOSED_SHARE_LIMIT,
    FSDP_LESS_MEMORY,
    HALF_MEMORY,
    NEAR_LINEAR,
)
from dpwise.compare.evidence import (
    Busy,
    Contention,
    Doubt,
    Drift,
    Evidence,
    ReferenceDiverged,
    Unsure,
)
from dpwise.infra.units import mib, pct, sci
from dpwise.measure.agreement import Untrained
from dpwise.results.filters import one_process_many_devices, one_process_per_device
from dpwise.results.records import CheckResult, Recommendation, Run

GUIDE = "guide"


def recommend(
    runs: list[Run],
    tolerance: float,
    device_type: str,
    known_cause: str | None = None,
    untrained: Untrained | None = None,
    cores: int | None = None,
) -> Recommendation:
    """The fastest run that is faster than single beyond the noise; otherwise single.

    A run that changed the model is a candidate only when the cause is known (e.g. BatchNorm) and
    is then named; runs of one process or one device are never preferred to single. When the
    evidence cannot separate a candidate from single, or a one-process run disagrees with single,
    the status is "inconclusive" (with the reason) and single stays the safe default.
    """
    found = weigh(runs, tolerance, device_type, known_cause, untrained, cores)
    best, runner = found.best, found.runner
    return Recommendation(
        strategy=best.strategy,
        world_size=best.world_size,
        run=best.id,
        runner_up=None if runner is None else runner.id,
        headline=text.headline(found),
        reasons=tuple(text.reasons(found)),
        status="inconclusive" if found.doubt else "recommended",
        inconclusive_reason=text.doubt(found.doubt),
        diverged=tuple(r.id for r in runs if diverged(r)),  # never recommended
        vs_single={k: c.to_dict() for k, c in found.vs.items()},
    )


def weigh(
    runs: list[Run],
    tolerance: float,
    device_type: str,
    known_cause: str | None = None,
    untrained: Untrained | None = None,
    cores: int | None = None,
) -> Evidence:
    """The runs weighed against single (see recommend)."""
    single = runs[0]
    ok = [r for r in runs if not diverged(r) and (params_agree(r, tolerance) or known_cause)]
    parallel = [r for r in ok if r.world_size > 1 and not r.notes]
    vs = {r.id: compare(r, single) for r in parallel}
    ranked = sorted(parallel, key=median_rate, reverse=True)
    faster = [r for r in ranked if vs[r.id].outcome == "faster"]
    doubt = _contended(runs, device_type, cores) or _inconclusive(runs, ranked, vs, bool(faster))
    best = faster[0] if faster and not doubt else single
    return Evidence(
        runs=tuple(runs),
        best=best,
        runner=next((r for r in [*ranked, single] if r is not best), None),
        vs=vs,
        doubt=doubt,
        tolerance=tolerance,
        known_cause=known_cause,
        untrained=untrained,
        device_type=device_type,
    )


def _contended(runs: list[Run], device_type: str, cores: int | None) -> Doubt | None:
    """Why the figures measure the machine's load rather than the strategies, or None (also
    where the machine's cores are not known)."""
    found = impossible(runs, device_type, cores) if cores else []
    if found and cores:
        return Contention(tuple(found), cores)
    load = machine_load(runs)
    return Busy(load) if load and load.get("busy") else None


def _inconclusive(
    runs: list[Run], ranked: list[Run], vs: dict[str, Comparison], any_faster: bool
) -> Doubt | None:
    """Why the evidence cannot pick a run, or None when it can: the machine's speed was not
    steady (a one-process run disagrees with single), or no run is faster and one might be."""
    if diverged(runs[0]):
        return ReferenceDiverged()
    drift = drifted(runs)
    if drift:
        return Drift(tuple(drift))
    unsure = [r for r in ranked if vs[r.id].outcome == "inconclusive"]
    return Unsure(vs[unsure[0].id]) if unsure and not any_faster else None


def _claim(claim: str, source: str, measured: str, verdict: str, why: str = "") -> dict[str, str]:
    return {"claim": claim, "source": source, "measured": measured, "verdict": verdict, "why": why}


def claims(
    runs: list[Run],
    checks: Mapping[Check, CheckResult],
    env: dict[str, Any],
    dp_vs_ddp: float | None,
) -> list[dict[str, str]]:
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


def _memory_claim(check: CheckResult, env: dict[str, Any]) -> dict[str, str]:
    text, src = "DDP uses ≈ 50 % less memory than DataParallel", f"{GUIDE}: Trade-Off Summary"
    ratio = check.figures.get("ddp_over_dp")
    if env["device_type"] == "cpu":
        why = "on the CPU DataParallel is a pass-through (the single-process run)"
        return _claim(text, src, "–", "cannot be tested", why)
    if ratio is None:
        return _claim(text, src, "–", "cannot be tested", "no dp and ddp run of the same size")
    held = "held" if ratio <= HALF_MEMORY else "did not hold"
    return _claim(text, src, f"DDP / DP peak per device = {ratio:.2f}", held)


FSDP_SOURCE = "PyTorch FSDP docs (fully_shard); ZeRO, Rajbhandari et al. 2020"


def _fsdp_memory_claim(check: CheckResult) -> dict[str, str] | None:
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
    held = "held" if less else "did not hold"
    if f.get("fsdp_within_one_gradient_copy"):
        why += "; the gap is under one copy of the gradients, within a peak's run-to-run spread"
        held = "not measurable here"
    return _claim("FSDP needs less memory per device than DDP", FSDP_SOURCE, measured, held, why)


def _faster_claim(runs: list[Run], gpus: int) -> dict[str, str]:
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
    held = "held" if clearly_faster(ddp[w], dp[w]) else "did not hold"
    return _claim(text, src, f"at {w} GPUs DDP / DP throughput = {ratio:.2f}", held, why)


def _linear_claim(check: CheckResult, gpus: int) -> dict[str, str]:
    text, src = "DDP scales almost linearly with GPU count", f"{GUIDE}: Trade-Off Summary"
    eff = check.figures.get("efficiency") or {}
    if gpus < 2 or len(eff) < 2:
        seen = ", ".join(f"{w}: {pct(e)}" for w, e in eff.items()) or "–"
        why = "fewer than 2 GPUs" if gpus < 2 else "ddp ran at fewer than two world sizes"
        where = "CPU efficiency" if gpus == 0 else "efficiency"
        return _claim(text, src, f"{where} {seen}", "cannot be tested", why)
    w = max(eff)
    held = "held" if eff[w] >= NEAR_LINEAR else "did not hold"
    return _claim(text, src, f"efficiency at {w} GPUs = {pct(eff[w])}", held)


def _plateau_claim(gpus: int) -> dict[str, str]:
    text, src = "DataParallel saturates around 4 GPUs", f"{GUIDE}: Trade-Off Summary"
    if gpus < 5:
        return _claim(text, src, "–", "cannot be tested", f"needs more than 4 GPUs; found {gpus}")
    return _claim(text, src, "see the throughput plot", "cannot be tested", "not yet automated")


def _agree_claim(dp_vs_ddp: float | None, cpu: bool) -> dict[str, str]:
    text = "DP and DDP parameters agree within 1e-4 after training"
    src = f"{GUIDE}: Validation Checklist 1"
    if dp_vs_ddp is None:
        return _claim(text, src, "no dp and ddp runs", "cannot be tested")
    if not math.isfinite(dp_vs_ddp):
        why = "a dp or ddp run diverged (a non-finite loss): see the convergence check"
        return _claim(text, src, "parameters not finite", "cannot be tested", why)
    held = "held" if dp_vs_ddp <= 1e-4 else "did not hold"
    why = "dpwise gives both the same batches, order, initial state and a mean-reduced loss"
    if cpu:
        why += "; on the CPU DataParallel is a pass-through, so this compares single with DDP"
    return _claim(text, src, f"max |Δparam| between dp and ddp = {sci(dp_vs_ddp)}", held, why)


def _async_claim(check: CheckResult) -> dict[str, str]:
    text = "DDP communicates asynchronously, so steps are not stalled by gradient sync"
    src = f"{GUIDE}: DistributedDataParallel"
    figures = check.figures
    if not figures:
        return _claim(text, src, "–", "cannot be tested", "no ddp run with 2 or more processes")
    run_id, comm = max(figures.items(), key=lambda kv: int(kv[0].rpartition("-")[2] or 0))
    if run_id.endswith("-1"):
        return _claim(text, src, "–", "cannot be tested", "no ddp run with 2 or more processes")
    share = comm["exposed_share"]
    held = "did not hold" if stalled(share) else "held"
    why = (
        "all-reduce overlaps the rest of backward, but the step waits for the last bucket; "
        f"below {pct(EXPOSED_SHARE_LIMIT)} of the step exposed, the same limit as the "
        "communication check, the communication counts as hidden"
    )
    return _claim(
        text, src, f"{run_id}: {pct(share)} of the step is exposed communication", held, why
    )


def _sync_points_claim(runs: list[Run], gpus: int) -> dict[str, str]:
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
    held = "held" if a < b else "did not hold"
    return _claim(text, src, f"sync points per step: DDP {a:.1f}, DP {b:.1f}", held)
