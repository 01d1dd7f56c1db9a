"""What every worker of the search runs: the process group once, the workload once, the search
(search.Search), and each configuration's training (Trainer): built from the seed, trained on the
epoch's first batches, timed after its warm-up steps; on its first round also its peak memory
and its final state (rank 0), for the equivalence proof."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import torch
import torch.distributed as dist

from dpwise.errors import DpwiseError
from dpwise.infra import scratch
from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.launch.elastic import run_guarded
from dpwise.launch.env import DistEnv
from dpwise.measure import memory, profile
from dpwise.strategies import make_strategy
from dpwise.strategies.base import Strategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import Loop
from dpwise.train.plan import RunPlan, resolve
from dpwise.tune import journal
from dpwise.tune.journal import Journal
from dpwise.tune.search import Search, Training
from dpwise.tune.space import TuneConfig
from dpwise.workload.data import BatchSource, epoch_permutation
from dpwise.workload.spec import Workload, workload_for

COLLECT_ABOVE_BYTES = 16 * 2**20


def _say(line: str) -> None:
    print(f"tune: {line}", file=sys.stderr, flush=True)


def search_entry(cfg: TuneConfig, started: float) -> Journal | None:
    """The function the elastic launcher runs in each worker; rank 0 returns the journal."""
    return run_guarded(_search, cfg, started)


def _search(cfg: TuneConfig, started: float) -> Journal | None:
    env = DistEnv.from_environ()
    hw = Hardware.detect()
    configure_threads(cfg.threads, env.local_world_size)
    plan = resolve(cfg.train_config({}), hw, env)
    holder = make_strategy(plan.strategy, env)  # holds the process group for every training
    holder.setup()
    try:
        workload = workload_for(cfg)
        data = workload.load_data(cfg.seed)
        box: list[Journal | None] = [None]
        if holder.is_main:
            box[0] = journal.read(cfg.out)
            if box[0] is None:
                raise DpwiseError(f"{journal.path(cfg.out)} is missing: start the search afresh")
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(box, src=0)
        assert box[0] is not None  # rank 0 sent it
        quiet = cfg.quiet or not holder.is_main
        search = Search(cfg, box[0], Trainer(env, hw, workload, data), holder.is_main, started,
                        (lambda line: None) if quiet else _say)  # fmt: skip
        done = search.run()
        return done if holder.is_main else None
    finally:
        holder.teardown()


@dataclass(frozen=True)
class _Took:
    """One process's part of a training, gathered from every process."""

    seconds: float
    total: float
    peak: int | None


class Trainer:
    """Trains configurations in this worker; the process group stays up between them."""

    def __init__(self, env: DistEnv, hw: Hardware, workload: Workload, data: BatchSource):
        self.env, self.hw, self.workload, self.data = env, hw, workload, data

    def train(self, tc: TrainConfig, warm: int, timed: int, first: bool) -> Training:
        if first:  # the peak is of this configuration alone: earlier trainings' cycles go first
            memory.release_freed(collect=True)
        plan = resolve(replace(tc, max_steps=warm + timed), self.hw, self.env)
        strategy = make_strategy(plan.strategy, self.env)
        strategy.setup()  # the group exists: only this configuration's own settings
        weights = COLLECT_ABOVE_BYTES  # collect after a failure
        try:
            loop, losses, took = self._steps(plan, strategy, tc.seed, (warm, timed), first)
            state = None
            if first:
                full = strategy.full_state_dict(loop.model)
                if strategy.is_main:
                    state = {k: v.detach().to("cpu", copy=True) for k, v in full.items()}
                del full
            mean = strategy.all_reduce_mean(torch.stack(losses).float()).tolist()
            every = cast(list[_Took], strategy.all_gather_object(took))  # each process's
            strategy.release(loop.model)  # DDP's Reducer let go while the group lives
            weights = sum(p.numel() * p.element_size() for p in loop.model.parameters())
            del loop
        finally:
            # the model and optimizer sit in reference cycles: collected where they are big
            # enough to matter (a collection costs about 0.3 s with torch loaded)
            memory.release_freed(collect=weights >= COLLECT_ABOVE_BYTES)
        peaks = [m.peak for m in every if m.peak is not None]
        return Training(
            seconds=max(m.seconds for m in every),
            total=max(m.total for m in every),
            losses=mean,
            peak_memory=max(peaks) if peaks else None,
            state=state,
        )

    def _steps(self, plan: RunPlan, strategy: Strategy, seed: int, steps: tuple[int, int],
               first: bool) -> tuple[Loop, list[torch.Tensor], _Took]:  # fmt: skip
        """The model built, its warm-up steps (their memory recorded on the CPU's first round),
        then its timed steps; this process's times and, on the first round, its peak."""
        warm, timed = steps
        device_type = plan.strategy.device_type
        devices = [strategy.device]
        start = time.perf_counter()
        losses: list[torch.Tensor] = []
        peak = None
        with scratch.folder("tune-trace") as tmp:
            recording = first and device_type == "cpu"
            memory.reset_peaks(devices)
            with _memory_recorded(recording, tmp) as trace:
                loop = Loop(plan, strategy, self.workload, data=self.data, stop_on_nonfinite=False)
                perm = epoch_permutation(len(self.data), seed, 0)
                for s in range(warm):
                    losses.append(loop.step(perm, s % loop.steps))
                strategy.synchronize()
            if trace is not None:
                peak = profile.peak_live_cpu_bytes(trace)
            elif first:
                peak = _peak(devices)
        clock = time.perf_counter()
        for s in range(warm, warm + timed):
            losses.append(loop.step(perm, s % loop.steps))
        strategy.synchronize()
        seconds = time.perf_counter() - clock
        total = time.perf_counter() - start
        if first and device_type == "cuda":
            peak = max(peak or 0, _peak(devices))
        return loop, losses, _Took(seconds, total, peak)


def _peak(devices: list[torch.device]) -> int:
    """The first device's peak bytes since the last reset."""
    found = memory.peaks(devices)[0]["bytes"]
    if not isinstance(found, (int, float)):
        raise TypeError(f"a device's peak is a number of bytes, not {found!r}")
    return int(found)


@contextlib.contextmanager
def _memory_recorded(on: bool, folder: Path) -> Iterator[Path | None]:
    """The CPU's live tensor bytes from the model's construction through the warm-up steps
    (torch.profiler's memory records, as compare measures them); yields the trace's path (None:
    not recorded), written when the block ends."""
    if not on:
        yield None
        return
    trace = folder / "trace.json"
    with profile.session("cpu", with_memory=True, with_shapes=False) as prof:
        yield trace
    profile.export(prof, trace)
