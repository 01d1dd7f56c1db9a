"""Run every configuration of a comparison, each in its own process, taking turns round by round.

All run processes start together and then wait; the parent grants one turn at a time: round r is
single's repeat r, then dp's, then ddp × 1's … (the order rotates each round), so a change in the
machine's speed hits every run alike and the runs can be compared round by round. Only one run
computes at a time. The parent holds no model, no data and no profiler: its memory stays small.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from dpwise.compare.matrix import RunSpec
from dpwise.compare.settings import RUN_MODULE, CompareConfig
from dpwise.compare.turns import RunFailed, TurnHost, ended, raise_failure, silence
from dpwise.compare.worker import run_process
from dpwise.infra import scratch
from dpwise.infra.interrupts import check as check_interrupted
from dpwise.infra.interrupts import terminate_raises
from dpwise.launch import forking
from dpwise.launch.forking import context
from dpwise.results.records import Run

READY_TIMEOUT_S = 30 * 60  # start-up: import, data, process group
TURN_TIMEOUT_S = 6 * 3600  # one repeat or one probe of one run
STOP_GRACE_S = 10.0
SILENCE_MIN_S = 10.0  # the shortest silence that fails a run process, even under --timeout 1

Event = Callable[[dict[str, Any]], None]
T = TypeVar("T")


def rounds(specs: list[T], repeats: int) -> list[tuple[int, T]]:
    """(round, run) in the order the turns are granted: each round rotates the order by one."""
    order = []
    for r in range(repeats):
        shift = r % len(specs)
        order += [(r, spec) for spec in specs[shift:] + specs[:shift]]
    return order


class RunProcesses:
    """One process per run, started together; stopped (terminated, then killed) on exit."""

    def __init__(self, specs: list[RunSpec], cfg: CompareConfig, host: TurnHost) -> None:
        ctx = context(RUN_MODULE)  # forked from a server that has imported torch
        forking.ensure_running(RUN_MODULE)  # a no-op where the command started it
        lent = forking.lend()  # a launched run forks its workers from the same server
        self.host, self.specs = host, specs
        # a beat a second: ten missed in a row is silence, whatever --timeout says (a busy
        # machine delays a thread by a second, not ten)
        self.timeout = cfg.timeout
        self.heard: dict[str, tuple[int, float]] = {}  # run -> (beats, when they last changed)
        self.procs = {
            s.id: ctx.Process(
                target=run_process, args=(s, cfg, host.address, lent), name=f"dpwise-{s.id}"
            )
            for s in specs
        }

    def __enter__(self) -> RunProcesses:
        for spec_id, proc in self.procs.items():
            proc.start()
            self.heard[spec_id] = (0, time.monotonic())
        return self

    def __exit__(self, *exc: object) -> None:
        alive = [p for p in self.procs.values() if p.is_alive()]
        for proc in alive:
            proc.terminate()
            with contextlib.suppress(OSError):  # a stopped process acts on SIGTERM only once
                os.kill(proc.pid, signal.SIGCONT)  # type: ignore[arg-type]  # alive: started
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in alive:
            proc.join(max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join()

    def watch(self) -> None:
        """Raise the first failure any run reported, or name a run whose process died."""
        check_interrupted()
        for spec in self.specs:
            failure = self.host.failure(spec.id)
            if failure is not None:
                raise_failure(spec.label, failure)
        for spec in self.specs:
            proc = self.procs[spec.id]
            if not proc.is_alive() and not self.host.store.check([f"{spec.id}/probe/done"]):
                time.sleep(0.2)  # its error report may still be on the way
                failure = self.host.failure(spec.id)
                if failure is not None:
                    raise_failure(spec.label, failure)
                raise RunFailed(spec.label, "", ended(proc.pid, proc.exitcode))
        self._listen()

    def _listen(self) -> None:
        """Name a run whose process has not beaten for --timeout seconds (turns.Heartbeat)."""
        now = time.monotonic()
        for spec in self.specs:
            if self.host.store.check([f"{spec.id}/probe/done"]):
                continue  # its work is done: it exits
            beats = self.host.beats(spec.id)
            heard, since = self.heard[spec.id]
            if beats != heard:
                self.heard[spec.id] = (beats, now)
            elif now - since > max(self.timeout, SILENCE_MIN_S):
                pid = self.procs[spec.id].pid
                raise silence(spec.label, pid, now - since, self.timeout, SILENCE_MIN_S)


def run_all(cfg: CompareConfig, specs: list[RunSpec], on_event: Event) -> list[Run]:
    """Measure every run of ``specs`` (the matrix the caller built and checked); ``on_event``
    sees start / repeat / probe events, in the parent."""
    cfg.out.mkdir(parents=True, exist_ok=True)
    host = TurnHost()
    turn_seconds = {s.id: 0.0 for s in specs}
    check_interrupted()
    # what a run's process left in the temporary folder (killed: its launch's folder) goes after
    with terminate_raises(), scratch.left_behind(), RunProcesses(specs, cfg, host) as procs:
        on_event({"what": "start", "label": "starting the runs"})
        for spec in specs:
            host.wait(spec.id, "ready", procs.watch, READY_TIMEOUT_S)
        for r, spec in rounds(specs, cfg.repeats):
            on_event({"what": "start", "label": f"round {r + 1}/{cfg.repeats}: {spec.label}"})
            start = time.perf_counter()
            host.play(spec.id, f"repeat-{r}", procs.watch, TURN_TIMEOUT_S)
            turn_seconds[spec.id] += time.perf_counter() - start
            on_event({"run": spec.id, "what": "repeat", "index": r + 1, "of": cfg.repeats})
        records = []
        for spec in specs:
            on_event({"what": "start", "label": f"profiling {spec.label}"})
            start = time.perf_counter()
            record = Run.from_json(
                json.loads(host.play(spec.id, "probe", procs.watch, TURN_TIMEOUT_S))
            )
            turn_seconds[spec.id] += time.perf_counter() - start
            records.append(replace(record, wall_seconds=turn_seconds[spec.id]))
            on_event({"run": spec.id, "what": "probe"})
    return records
