"""Measure one run of a comparison in each of its processes: timed repeats, a profiled probe."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from dpwise.compare.matrix import RunSpec
from dpwise.measure import buckets, load, memory, profile
from dpwise.measure.stats import summary
from dpwise.strategies import traits
from dpwise.strategies.base import Strategy
from dpwise.strategies.traits import VISIBLE
from dpwise.train.checkpoint import atomic_torch_save
from dpwise.train.engine import Loop
from dpwise.train.plan import RunPlan
from dpwise.train.result import EpochRecord
from dpwise.workload.data import BatchSource, epoch_permutation
from dpwise.workload.spec import Workload

WARM_STEPS = 2
COLLECT_ABOVE_BYTES = 16 * 2**20
EXPOSED_PAIRS = 8  # synced / unsynced step pairs (fewer when --profile-steps is small)


def timed_epochs(epochs: list[EpochRecord]) -> list[EpochRecord]:
    """The epochs a repeat is timed on: all but the first (a warm-up) when there are several."""
    return epochs[1:] if len(epochs) > 1 else epochs


def _keep_grads(model: torch.nn.Module) -> None:
    """After a no_sync step, DDP with find_unused_parameters all-reduces every parameter that step
    used; the step's zero_grad(set_to_none) left them None, which DDP refuses: give them zeros."""
    for p in model.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


class Repeats:
    """Full trainings from the same initial state, one per turn; nothing kept between turns
    but figures, so an idle run process holds little memory while the others compute."""

    def __init__(self, plan: RunPlan, strategy: Strategy, workload: Workload, data: BatchSource):
        self.plan, self.strategy, self.workload, self.data = plan, strategy, workload, data
        self.epoch_seconds: list[float] = []
        self.rates: list[float] = []
        self.training = 0.0
        self.others: list[float] = []  # other processes' share of the cores, per repeat
        self.first: dict[str, Any] = {}
        memory.reset_peak_rss()

    def run(self, final: Path | None) -> None:
        """One repeat; the first saves its final state to ``final`` (rank 0 passes a path)."""
        # a run whose loss goes non-finite trains on (its processes stay in step), marked
        loop = Loop(
            self.plan, self.strategy, self.workload, data=self.data, stop_on_nonfinite=False
        )
        start = load.Mark.now()
        trained = loop.run()
        gathered = self.strategy.all_gather_object(load.Span.since(start))  # every process's CPU
        share = load.others_share([span for span in gathered if isinstance(span, load.Span)])
        if share is not None:
            self.others.append(share)
        timed = timed_epochs(trained.result.epochs)
        seconds = sum(e["seconds"] for e in timed)
        self.training += sum(e["seconds"] for e in trained.result.epochs)
        self.epoch_seconds.append(statistics.median(e["seconds"] for e in timed))
        self.rates.append(sum(e["samples"] for e in timed) / seconds if seconds > 0 else 0.0)
        if not self.first:
            if final is not None:
                atomic_torch_save(trained.state, final)
            r = trained.result
            self.first = {
                "losses": r.losses,
                "peak_memory": r.peak_memory,
                "diverged": r.diverged,
                "samples_per_epoch": r.steps_per_epoch * self.plan.config.batch_size,
            }
        # the model and optimizer sit in reference cycles: collect them where they are big enough
        # to matter; a small model's leftovers wait for Python's collector (saves ~0.1 s a turn)
        weights = sum(p.numel() * p.element_size() for p in trained.model.parameters())
        del trained, loop
        memory.release_freed(collect=weights >= COLLECT_ABOVE_BYTES)

    def timing(self) -> dict[str, Any]:
        return {
            "epoch_seconds": summary(self.epoch_seconds),
            "samples_per_s": summary(self.rates),
            "samples_per_epoch": self.first["samples_per_epoch"],
            "training_seconds": self.training,
            "peak_rss_bytes": memory.peak_rss_since_reset(),
            "other_cpu_share": summary(self.others) if self.others else None,
        }


def _exposed(loop: Loop, strategy: Strategy, perm: torch.Tensor, pairs: int) -> dict[str, float]:
    """Step time with gradient sync against the same step inside no_sync (no communication).

    The two kinds of step alternate, so a change in machine load affects both alike.
    """
    counter = itertools.count()
    synced, unsynced = [], []

    def step() -> None:
        loop.step(perm, next(counter) % loop.steps)

    def quiet_step() -> None:
        with strategy.no_sync(loop.model):
            step()
        if getattr(loop.model, "find_unused_parameters", False):
            _keep_grads(loop.model)

    for _ in range(pairs):
        synced.append(profile.timed_steps(step, 1, strategy.synchronize))
        unsynced.append(profile.timed_steps(quiet_step, 1, strategy.synchronize))
    with_sync, without = statistics.median(synced), statistics.median(unsynced)
    exposed = max(0.0, with_sync - without)
    return {
        "step_ms": with_sync * 1e3,
        "step_ms_without_sync": without * 1e3,
        "exposed_ms": exposed * 1e3,
        "exposed_share": exposed / with_sync if with_sync > 0 else 0.0,
    }


def _pairs(profile_steps: int) -> int:
    return min(EXPOSED_PAIRS, max(3, 2 * profile_steps))


def profiled_probe(
    spec: RunSpec,
    plan: RunPlan,
    strategy: Strategy,
    workload: Workload,
    data: BatchSource,
    trace: Path,
    profile_steps: int,
    last_work: bool = False,
) -> dict[str, Any]:
    """A few steps under torch.profiler (memory recorded from the model's construction on).

    Exposed communication is timed first, with the allocator as training had it. Where the probe
    is its process's last work (compare's run processes), large blocks are then made to go back
    to the system when freed: the profiler's many small records otherwise pin freed activations
    in the heap (a ViT-sized step under the profiler peaked at 1.35-2.1x its RSS without the
    profiler; 1.01x with this).
    """
    steps = WARM_STEPS + profile_steps
    probe_plan = replace(plan, config=replace(plan.config, epochs=1, max_steps=steps))
    perm = epoch_permutation(len(data), plan.config.seed, 0)
    exposed = None
    if spec.launched:
        # one process has nothing to exchange: its "exposed" time would be noise
        loop = Loop(probe_plan, strategy, workload, data=data)
        for s in range(WARM_STEPS):
            loop.step(perm, s % loop.steps)
        exposed = _exposed(loop, strategy, perm, _pairs(profile_steps))
        del loop
        memory.release_freed()
    if last_work:
        memory.return_large_blocks()
    # input shapes give the bytes collectives move; only where read
    shapes = spec.launched or spec.device_type == "cuda"
    with profile.session(spec.device_type, with_memory=True, with_shapes=shapes) as prof:
        loop = Loop(probe_plan, strategy, workload, data=data)
        for s in range(steps):
            with profile.mark_step():
                loop.step(perm, s % loop.steps)
        strategy.synchronize()
    profile.export(prof, trace)
    out = _figures(spec, loop, list(prof.events()), trace)
    if exposed is not None:
        out["communication"].update(exposed)
    del prof, loop
    memory.release_freed()
    return out


def _figures(spec: RunSpec, loop: Loop, events: list[Any], trace: Path) -> dict[str, Any]:
    """What the profiled steps say: live tensor peak (CPU), sync points (GPU), collectives."""
    windows = profile.step_windows(events, skip=WARM_STEPS)
    out: dict[str, Any] = {"trace": trace}
    if spec.device_type == "cpu":
        out["live_tensor_bytes"] = profile.peak_live_cpu_bytes(trace)
    else:
        out["sync_points_per_step"] = profile.sync_points(events, windows)
    kind = traits(spec.strategy)
    if kind.process_group:  # collectives over the process group
        params = list(loop.model.parameters())
        out["communication"] = {
            **profile.collectives(events, windows, params[0].element_size()),
            "gradient_bytes": sum(p.numel() * p.element_size() for p in params if p.requires_grad),
        }
        if spec.launched and not kind.shards_model:  # DDP's buckets as launched (for projection)
            element_size = params[0].element_size()
            out["communication"]["buckets"] = buckets.step_buckets(events, windows, element_size)
    elif kind.devices == VISIBLE and spec.device_type == "cuda":  # copies between the GPUs
        out["communication"] = {"collectives": profile.dp_ops(events, windows)}
    return out
