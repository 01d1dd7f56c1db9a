"""One training of one configuration inside the search's workers: built from the seed, trained
on the epoch's first batches, timed after its warm-up steps; on its first round also its peak
memory and its final state (rank 0), for the equivalence proof."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, replace
from typing import Any

import torch

from dpwise.infra import scratch
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.measure import memory, profile
from dpwise.strategies import make_strategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import Loop
from dpwise.train.plan import resolve
from dpwise.workload.data import BatchSource, epoch_permutation
from dpwise.workload.spec import Workload

COLLECT_ABOVE_BYTES = 16 * 2**20


@dataclass
class Training:
    seconds: float  # the timed steps, the slowest process's
    total: float  # the whole training: build, warm-up and timed steps, the slowest process's
    losses: list[float]  # each step's loss, averaged over the processes
    peak_memory: int | None = None  # the busiest device's peak (first round only)
    state: dict[str, torch.Tensor] | None = None  # rank 0's final state (first round only)


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
        device_type = plan.strategy.device_type
        start = time.perf_counter()
        weights = COLLECT_ABOVE_BYTES  # collect after a failure
        losses: list[torch.Tensor] = []
        peak = None
        try:
            with scratch.folder("tune-trace") as tmp:
                recording = first and device_type == "cpu"
                devices = [strategy.device]
                memory.reset_peaks(devices)
                with _memory_recorded(recording, tmp) as traced:
                    loop = Loop(
                        plan, strategy, self.workload, data=self.data, stop_on_nonfinite=False
                    )
                    perm = epoch_permutation(len(self.data), tc.seed, 0)
                    for s in range(warm):
                        losses.append(loop.step(perm, s % loop.steps))
                    strategy.synchronize()
                if recording:
                    peak = profile.peak_live_cpu_bytes(traced())
                elif first:
                    peak = int(memory.peaks(devices)[0]["bytes"])
            clock = time.perf_counter()
            for s in range(warm, warm + timed):
                losses.append(loop.step(perm, s % loop.steps))
            strategy.synchronize()
            seconds = time.perf_counter() - clock
            total = time.perf_counter() - start
            if first and device_type == "cuda":
                peak = max(peak or 0, int(memory.peaks(devices)[0]["bytes"]))
            state = None
            if first:
                full = strategy.full_state_dict(loop.model)
                if strategy.is_main:
                    state = {k: v.detach().to("cpu", copy=True) for k, v in full.items()}
                del full
            mean = strategy.all_reduce_mean(torch.stack(losses).float()).tolist()
            mine = {"seconds": seconds, "total": total, "peak": peak}
            every: list[Any] = strategy.all_gather_object(mine)
            strategy.release(loop.model)  # DDP's Reducer let go while the group lives
            weights = sum(p.numel() * p.element_size() for p in loop.model.parameters())
            del loop
        finally:
            # the model and optimizer sit in reference cycles: collected where they are big
            # enough to matter (a collection costs about 0.3 s with torch loaded)
            memory.release_freed(collect=weights >= COLLECT_ABOVE_BYTES)
        peaks = [m["peak"] for m in every if m["peak"] is not None]
        return Training(
            seconds=max(m["seconds"] for m in every),
            total=max(m["total"] for m in every),
            losses=mean,
            peak_memory=max(peaks) if peaks else None,
            state=state,
        )


@contextlib.contextmanager
def _memory_recorded(on: bool, folder: Any):
    """The CPU's live tensor bytes from the model's construction through the warm-up steps
    (torch.profiler's memory records, as compare measures them); yields the trace's path."""
    if not on:
        yield lambda: None
        return
    trace = folder / "trace.json"
    with profile.session("cpu", with_memory=True, with_shapes=False) as prof:
        yield lambda: trace
    profile.export(prof, trace)
