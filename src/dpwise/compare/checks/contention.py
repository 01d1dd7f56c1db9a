"""Figures the hardware cannot produce, and how busy the machine was: what contention did.

On one CPU every run shares the same cores. When other processes compete for them, a
multi-threaded run (single) can lose far more than one-thread processes (ddp's workers): the
ratios then show ddp × 2 at many times single, or a one-process pass-through faster than the run
it passes through. Such a figure measures the load, not the strategy: it is named as contention,
never passed as a result.
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

from dpwise.compare.checks.base import diverged
from dpwise.compare.checks.thresholds import CONTENTION_MARGIN, ONE_PROCESS_MARGIN
from dpwise.measure.load import BUSY_SHARE
from dpwise.results.records import Json, Run


class Contended(NamedTuple):
    """A run whose speed-up over single this CPU cannot produce: above ``bound``."""

    run: Run
    bound: float


def bound(run: Run, cores: int) -> float:
    """The largest speed-up over single the run's hardware allows on one CPU."""
    if run.world_size == 1 or run.notes:  # single's work on single's cores (a pass-through too)
        return ONE_PROCESS_MARGIN
    return min(run.world_size, cores) * CONTENTION_MARGIN


def impossible(runs: list[Run], device_type: str, cores: int) -> list[Contended]:
    """The runs (with their bound) whose speed-up over single the CPU cannot produce."""
    if device_type != "cpu":
        return []
    return [
        Contended(r, bound(r, cores))
        for r in runs[1:]
        if not diverged(r)
        and r.speedup_vs_single is not None
        and r.speedup_vs_single > bound(r, cores)
    ]


def machine_load(runs: list[Run]) -> Json | None:
    """results.json's ``load``: other processes' share of the cores while the runs measured
    (dpwise.measure.load), over every repeat of every run; None where it was not measured."""
    values = [v for r in runs for v in r.other_cpu_share.values if v is not None]
    if not values:
        return None
    median = statistics.median(values)
    return {
        "other_cpu_share": {
            "median": median,
            "max": max(values),
            "by_run": {r.id: r.other_cpu_share.median for r in runs},
        },
        "busy": median >= BUSY_SHARE,
        "busy_share": BUSY_SHARE,
        "method": "the machine's busy CPU time (/proc/stat) less the run's own processes' CPU "
        "time, per repeat, as a share of wall time × cores",
    }
