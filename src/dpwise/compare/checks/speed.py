"""Check 3, speed: each run's throughput against single, round by round, beyond the noise."""

from __future__ import annotations

from dpwise.compare.checks.base import (
    Check,
    CheckContext,
    CheckResult,
    Comparison,
    compare,
    median_rate,
)
from dpwise.compare.checks.contention import busy_text, impossible, impossible_text, machine_load
from dpwise.compare.checks.thresholds import CONFIDENCE, ONE_PROCESS_MARGIN, SPEED_MARGIN
from dpwise.infra.units import pct, rate
from dpwise.results.records import Run

NAME = "speed"

RULE = (
    f"A run counts as faster than single only when the whole {CONFIDENCE:.0%} interval of its "
    f"per-round throughput ratio lies beyond {SPEED_MARGIN - 1:.0%}; an interval inside ±"
    f"{SPEED_MARGIN - 1:.0%} means no practical difference, and one that crosses the margin "
    "is inconclusive: the noise of this machine cannot separate the two."
)


def _vs(c: Comparison) -> str:
    return f"{c.ratio:.2f}× ({c.interval}) {c.outcome}"


def evaluate(ctx: CheckContext) -> CheckResult:
    runs, repeats = list(ctx.runs), ctx.repeats
    single = runs[0]
    vs = {r.id: compare(r, single) for r in runs[1:]}
    rows = [
        [
            r.label,
            f"{r.epoch_seconds.median:.3f}",
            f"{r.epoch_seconds.min:.3f}–{r.epoch_seconds.max:.3f}",
            rate(median_rate(r)),
            "reference" if r is single else _vs(vs[r.id]),
        ]
        for r in runs
    ]
    table = {
        "columns": [
            "run",
            "epoch s (median)",
            "spread (min–max)",
            "samples/s",
            f"vs single: median ratio ({CONFIDENCE:.0%} interval)",
        ],
        "rows": rows,
    }
    contended = impossible(runs, ctx.device_type, ctx.cpu_cores)
    load = machine_load(runs)
    busy = busy_text(load)
    unreal = {r.id for r, _ in contended}
    # a CPU pass-through is the single run again; a figure the CPU cannot produce is contention
    real = [r for r in runs if not r.notes and r.id not in unreal]
    best = max(real or runs[:1], key=median_rate)
    parallel = [r for r in real if r.world_size > 1]
    faster = [r for r in parallel if vs[r.id].outcome == "faster"]
    unsure = [r for r in parallel if vs[r.id].outcome == "inconclusive"]
    drift = drifted(runs)
    costly = wrapper_costs(runs)
    status = "pass" if (faster or not parallel) and not drift and not unsure else "warn"
    if contended or busy:
        status = "warn"
    return CheckResult(
        NAME,
        status,
        _contention(contended, busy, ctx.cpu_cores)
        + f"fastest: {best.label} at {rate(median_rate(best))} samples/s "
        f"({best.speedup_vs_single:.2f}× single)"
        + _finding(faster, unsure, parallel, drift)
        + _costs(costly, single),
        f"Each run trained {repeats} times from the same initial state (the first epoch of a "
        "repeat is an untimed warm-up when it has more than one); the runs took turns in "
        f"{repeats} interleaved rounds, one run computing at a time, so a change in the "
        f"machine's speed hits every run alike, and each run is compared with single round by "
        f"round. {RULE}"
        + (ONE_PROCESS_NOTE if drift else "")
        + (WRAPPER_NOTE if costly else "")
        + _load_note(load),
        {
            "fastest": best.id,
            "speedup": {r.id: r.speedup_vs_single for r in runs},
            "vs_single": {k: c.to_dict() for k, c in vs.items()},
            "inconclusive": [r.id for r in unsure],
            "contention": {
                r.id: {"speedup": r.speedup_vs_single, "at_most": b} for r, b in contended
            },
            "load": load,
            "drift_suspected_in": drift,
            "wrapper_cost_s_per_epoch": {
                r.id: r.epoch_seconds.median - single.epoch_seconds.median for r in costly
            },
        },
        table,
        "throughput.png",
    )


def _load_note(load: dict | None) -> str:
    """How busy the machine was while the runs measured, said whether busy or not."""
    if not load:
        return ""
    share = load["other_cpu_share"]
    return (
        f" Other processes used {pct(share['median'])} of the machine's cores while the runs "
        f"measured (median over every repeat; up to {pct(share['max'])})"
        + ("; at 25 % or more the machine counts as busy." if load["busy"] else ".")
    )


def _contention(found: list, busy: str | None, cores: int) -> str:
    """The summary's opening where contention made the figures: what no CPU can do, and the
    load."""
    parts = []
    if found:
        parts.append(
            f"figures this CPU cannot produce, from contention (other processes slowed the runs "
            f"unevenly), not from the strategies: {impossible_text(found, cores)}"
        )
    if busy:
        parts.append(busy)
    return "; ".join(parts) + ". " if parts else ""


def _finding(faster: list[Run], unsure: list[Run], parallel: list[Run], drift: list[str]) -> str:
    if drift:
        return (
            f"; {', '.join(drift)} should match single but differ beyond the noise: the "
            "machine's speed drifted within rounds or the set-up differs"
        )
    if faster:
        return f"; {', '.join(r.label for r in faster)} faster than single beyond the noise"
    if unsure:
        return f"; inconclusive for {', '.join(r.label for r in unsure)}: within the noise"
    if parallel:
        return "; no parallel run was faster than single"
    return ""


def _costs(costly: list[Run], single: Run) -> str:
    return "".join(
        f"; {r.label} does single's work at {compare(r, single).ratio:.2f}× its speed: "
        f"{(r.epoch_seconds.median - single.epoch_seconds.median) * 1000:.0f} ms more per epoch "
        f"of {single.epoch_seconds.median * 1000:.0f} ms, its wrapper's fixed cost"
        for r in costly
    )


ONE_PROCESS_NOTE = (
    " A run of one process on one device does single's work plus DDP's or DataParallel's "
    f"overhead, yet its throughput beats single's by more than {ONE_PROCESS_MARGIN - 1:.0%}"
    " over the whole interval. Interleaving spreads slow drift over every run, so this points "
    "at load that changed within rounds (other programs) or at a set-up difference such as the "
    "number of threads; run again on a quiet machine before trusting small differences."
)

WRAPPER_NOTE = (
    " A run of one process on one device does single's work plus its wrapper's: DDP's gradient "
    "hooks, bucket copies and a one-process all-reduce, or DataParallel's scatter and gather. "
    "That cost is fixed per step, so it is a visible share of a short step and shrinks as the "
    "step grows; on more devices it is paid again on top of the communication."
)


def _one_process(runs: list[Run], outcome: str) -> list[Run]:
    """Runs of world size 1 whose speed differs from single's by over 10 % beyond the noise."""
    single = runs[0]
    return [
        r
        for r in runs[1:]
        if r.world_size == 1 and compare(r, single, ONE_PROCESS_MARGIN).outcome == outcome
    ]


def drifted(runs: list[Run]) -> list[str]:
    """One-process runs faster than single beyond the noise: a wrapper adds work, so only a
    machine whose speed changed within rounds (or a different set-up) explains them."""
    return [r.label for r in _one_process(runs, "faster")]


def wrapper_costs(runs: list[Run]) -> list[Run]:
    """One-process runs slower than single beyond the noise: the wrapper's fixed cost per step."""
    return _one_process(runs, "slower")


SPEED = Check(NAME, evaluate)
