"""Measure one run of a comparison in each of its processes: timed repeats, a profiled probe."""

from __future__ import annotations

import itertools
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch

from dpwise.checkpoint import atomic_torch_save
from dpwise.compare.matrix import RunSpec
from dpwise.compare.progress import ProgressWriter
from dpwise.data import BatchSource, epoch_permutation
from dpwise.engine import Loop
from dpwise.measure import memory, profile
from dpwise.measure.stats import summary
from dpwise.plan import RunPlan
from dpwise.strategies.base import Strategy
from dpwise.workload import Workload

WARM_STEPS = 2
EXPOSED_STEPS = 8


def timed_repeats(
    plan: RunPlan,
    strategy: Strategy,
    workload: Workload,
    data: BatchSource,
    repeats: int,
    progress: ProgressWriter,
) -> tuple[dict[str, Any], Any]:
    """R full trainings from the same initial state; epoch 1 of each is an untimed warm-up."""
    per_repeat, training, first = [], 0.0, None
    memory.reset_peak_rss()
    for r in range(repeats):
        trained = Loop(plan, strategy, workload, data=data).run()
        seconds = [e["seconds"] for e in trained.result.epochs]
        training += sum(seconds)
        per_repeat.append(statistics.median(seconds[1:]))
        first = first or trained
        progress.emit("repeat", index=r + 1, of=repeats)
    samples = first.result.steps_per_epoch * plan.config.batch_size
    return {
        "epoch_seconds": summary(per_repeat),
        "samples_per_s": summary([samples / s for s in per_repeat]),
        "samples_per_epoch": samples,
        "training_seconds": training,
        "peak_rss_bytes": memory.peak_rss_since_reset(),
        "device_peaks": first.result.peak_memory,
    }, first


def _keep_grads(model: torch.nn.Module) -> None:
    """After a no_sync step, DDP with find_unused_parameters all-reduces every parameter that step
    used; the step's zero_grad(set_to_none) left them None, which DDP refuses: give them zeros."""
    for p in model.parameters():
        if p.requires_grad and p.grad is None:
            p.grad = torch.zeros_like(p)


def _exposed(loop: Loop, strategy: Strategy, perm: torch.Tensor) -> dict[str, float]:
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

    for _ in range(EXPOSED_STEPS):
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


def profiled_probe(
    spec: RunSpec,
    plan: RunPlan,
    strategy: Strategy,
    workload: Workload,
    data: BatchSource,
    trace: Path,
    profile_steps: int,
) -> dict[str, Any]:
    """A few steps under torch.profiler (memory recorded from the model's construction on)."""
    steps = WARM_STEPS + profile_steps
    probe_plan = replace(plan, config=replace(plan.config, epochs=1, max_steps=steps))
    perm = epoch_permutation(len(data), plan.config.seed, 0)
    with profile.session(spec.device_type, with_memory=True) as prof:
        loop = Loop(probe_plan, strategy, workload, data=data)
        for s in range(steps):
            with profile.mark_step():
                loop.step(perm, s % loop.steps)
        strategy.synchronize()
    profile.export(prof, trace)
    events = list(prof.events())
    windows = profile.step_windows(events, skip=WARM_STEPS)
    out: dict[str, Any] = {"trace": trace}
    if spec.device_type == "cpu":
        out["live_tensor_bytes"] = profile.peak_live_cpu_bytes(trace)
    else:
        out["sync_points_per_step"] = profile.sync_points(events, windows)
    if spec.strategy == "ddp":
        element = next(loop.model.parameters()).element_size()
        out["communication"] = {
            **profile.collectives(events, windows, element),
            "gradient_bytes": sum(
                p.numel() * p.element_size() for p in loop.model.parameters() if p.requires_grad
            ),
            **_exposed(loop, strategy, perm),
        }
    elif spec.strategy == "dp" and spec.device_type == "cuda":
        out["communication"] = {"collectives": profile.dp_ops(events, windows)}
    return out


def save_final(trained: Any, path: Path) -> None:
    atomic_torch_save(trained.model.state_dict(), path)
