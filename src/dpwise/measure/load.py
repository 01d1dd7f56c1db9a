"""How busy the machine was while a run measured: the CPU time of every other process.

The kernel counts every core's busy time (``/proc/stat``); each of a run's processes knows its own
CPU time (``time.process_time``, all its threads). Over one repeat, the machine's busy time less
the run's own is what other processes used: other jobs, and dpwise's parent (a few per cent at
most). As a share of the machine (wall time × cores) it says how much of the hardware the run did
not have. Linux only; elsewhere nothing is measured (None).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

STAT = "/proc/stat"
# Other processes using this share of the machine's cores (median over a run's repeats) make
# the machine "busy": its throughput figures then measure the contention as much as the run.
BUSY_SHARE = 0.25


def _machine() -> tuple[float, int] | None:
    """Busy CPU seconds of all cores since boot, and the number of cores /proc/stat counts."""
    try:
        with open(STAT) as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    first = lines[0].split() if lines else []
    if len(first) < 8 or first[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, *rest = (int(v) for v in first[1:])
    steal = rest[0] if rest else 0
    cores = sum(1 for line in lines if line.startswith("cpu") and line[3:4].isdigit())
    ticks = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    return (user + nice + system + irq + softirq + steal) / ticks, max(1, cores)


@dataclass(frozen=True)
class Mark:
    """The clocks at the start of a measured span."""

    wall: float
    own: float  # this process's CPU seconds
    machine: float | None  # the machine's busy CPU seconds (None: not measurable here)
    cores: int

    @classmethod
    def now(cls) -> Mark:
        found = _machine()
        machine, cores = found if found else (None, os.cpu_count() or 1)
        return cls(time.perf_counter(), time.process_time(), machine, cores)


@dataclass(frozen=True)
class Span:
    """One process's view of a span: its wall time, its own CPU time, the machine's busy time."""

    wall: float
    own: float
    machine: float | None
    cores: int

    @classmethod
    def since(cls, start: Mark) -> Span:
        end = Mark.now()
        machine = None
        if start.machine is not None and end.machine is not None:
            machine = end.machine - start.machine
        return cls(end.wall - start.wall, end.own - start.own, machine, start.cores)


def others_share(spans: list[Span]) -> float | None:
    """The share of the machine's cores other processes used during a span that ``spans`` (one
    per process of a run, the first one's wall and machine figures) cover; None where the
    machine's time is unknown. Clocks read a little apart can make it slightly negative: 0."""
    first = spans[0] if spans else None
    if first is None or first.machine is None or first.wall <= 0:
        return None
    other = first.machine - sum(s.own for s in spans)
    return max(0.0, other / (first.wall * first.cores))
