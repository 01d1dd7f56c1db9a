"""Check 3, speed: each run's throughput against single, round by round, beyond the noise.

What it finds is data (a SpeedFinding); checks/text.py says it."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.compare.checks.base import CheckContext, Comparison, Finding, Outcome, compare
from dpwise.compare.checks.contention import Contended, impossible, machine_load
from dpwise.compare.checks.thresholds import CONFIDENCE, ONE_PROCESS_MARGIN
from dpwise.infra.units import rate
from dpwise.results.records import CheckStatus, Json, Run, Table

NAME = "speed"


@dataclass(frozen=True, kw_only=True)
class SpeedFinding(Finding):
    single: Run
    best: Run  # the fastest run whose figures this machine can produce
    faster: tuple[Run, ...]  # parallel runs faster than single beyond the noise
    unsure: tuple[Run, ...]  # parallel runs the noise cannot separate from single
    parallel: tuple[Run, ...]  # runs of two or more processes or devices, measured for real
    drift: tuple[str, ...]  # one-process runs faster than single: the machine's speed drifted
    costly: tuple[Run, ...]  # one-process runs slower than single: their wrapper's fixed cost
    contended: tuple[Contended, ...]  # figures this CPU cannot produce
    load: Json | None  # how busy the machine was (contention.machine_load)
    repeats: int
    cores: int


def find(ctx: CheckContext) -> SpeedFinding:
    runs = list(ctx.runs)
    single = runs[0]
    vs = {r.id: compare(r, single) for r in runs[1:]}
    contended = impossible(runs, ctx.device_type, ctx.cpu_cores)
    load = machine_load(runs)
    unreal = {c.run.id for c in contended}
    # a CPU pass-through is the single run again; a figure the CPU cannot produce is contention
    real = [r for r in runs if not r.notes and r.id not in unreal]
    parallel = [r for r in real if r.world_size > 1]
    faster = [r for r in parallel if vs[r.id].outcome == "faster"]
    unsure = [r for r in parallel if vs[r.id].outcome == "inconclusive"]
    drift, costly = drifted(runs), wrapper_costs(runs)
    best = max(real or runs[:1], key=lambda r: r.median_rate)
    status: CheckStatus = (
        "pass" if (faster or not parallel) and not drift and not unsure else "warn"
    )
    if contended or (load and load["busy"]):
        status = "warn"
    return SpeedFinding(
        status=status,
        figures=_figures(runs, best, vs, unsure, contended, load, drift, costly),
        table=_table(runs, vs),
        plot="throughput.png",
        single=single,
        best=best,
        faster=tuple(faster),
        unsure=tuple(unsure),
        parallel=tuple(parallel),
        drift=tuple(drift),
        costly=tuple(costly),
        contended=tuple(contended),
        load=load,
        repeats=ctx.repeats,
        cores=ctx.cpu_cores,
    )


def extra_seconds(run: Run, single: Run) -> float:
    """How much longer the run's median epoch took than single's."""
    return _median(run.epoch_seconds.median) - _median(single.epoch_seconds.median)


def _median(seconds: float | None) -> float:
    if seconds is None:
        raise ValueError("a run without a measured epoch time")
    return seconds


def _figures(
    runs: list[Run],
    best: Run,
    vs: dict[str, Comparison],
    unsure: list[Run],
    contended: list[Contended],
    load: Json | None,
    drift: list[str],
    costly: list[Run],
) -> Json:
    return {
        "fastest": best.id,
        "speedup": {r.id: r.speedup_vs_single for r in runs},
        "vs_single": {k: c.to_dict() for k, c in vs.items()},
        "inconclusive": [r.id for r in unsure],
        "contention": {
            c.run.id: {"speedup": c.run.speedup_vs_single, "at_most": c.bound} for c in contended
        },
        "load": load,
        "drift_suspected_in": drift,
        "wrapper_cost_s_per_epoch": {r.id: extra_seconds(r, runs[0]) for r in costly},
    }


def _table(runs: list[Run], vs: dict[str, Comparison]) -> Table:
    def versus(r: Run) -> str:
        if r is runs[0]:
            return "reference"
        c = vs[r.id]
        return f"{c.ratio:.2f}× ({c.interval}) {c.outcome}"

    rows = [
        [
            r.label,
            f"{r.epoch_seconds.median:.3f}",
            f"{r.epoch_seconds.min:.3f}–{r.epoch_seconds.max:.3f}",
            rate(r.median_rate),
            versus(r),
        ]
        for r in runs
    ]
    columns = ["run", "epoch s (median)", "spread (min–max)", "samples/s"]
    return {
        "columns": [*columns, f"vs single: median ratio ({CONFIDENCE:.0%} interval)"],
        "rows": rows,
    }


def _one_process(runs: list[Run], outcome: Outcome) -> list[Run]:
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
