"""Synthetic run records, built through compare's own types, for testing checks and the verdict."""

from __future__ import annotations

import random
from typing import Any

from dpwise.compare.checks import CheckContext, Diagnosis
from dpwise.results.records import DevicePeak, Memory, Run, Spread
from dpwise.strategies import traits

CLEAN = Diagnosis(batchnorm=[], stochastic=[], loss_reduction="mean")


def run(
    id: str,
    rate: float,
    *,
    diff: float = 0.0,
    peak: int = 10 * 2**20,
    spread: float = 0.02,
    comm: dict[str, Any] | None = None,
    notes: list[str] | None = None,
    threads: int = 1,
    single_rate: float = 1000.0,
    rounds: int = 12,
) -> Run:
    """``spread``: each round's throughput is rate × (1 ± spread), independent per run."""
    noise = random.Random(id)
    values = [rate * (1 + noise.uniform(-spread, spread)) for _ in range(rounds)]
    strategy, _, size = id.partition("-")
    world = int(size or 1)
    devices = world if traits(strategy).multiprocess else 1  # ddp-W, fsdp-W: a peak per process
    return Run(
        id=id,
        label=id.replace("-", " × "),
        strategy=strategy,
        world_size=world,
        threads_per_process=threads,
        notes=tuple(notes or ()),
        epoch_seconds=Spread(median=1000 / rate, min=1000 / rate / 1.05, max=1000 / rate * 1.05),
        samples_per_s=Spread(median=rate, min=min(values), max=max(values), values=tuple(values)),
        speedup_vs_single=rate / single_rate,
        max_param_diff_vs_single=diff,
        losses=(2.3, 2.2),
        memory=Memory(
            kind="cpu_live_tensors",
            per_device=tuple(
                DevicePeak(rank=r, device="cpu", peak_bytes=peak) for r in range(devices)
            ),
            peak_rss_bytes=(300 * 2**20,) * devices,
        ),
        communication=comm,
        sync_points_per_step=None,
    )


def context(
    runs: list[Run],
    *,
    tolerance: float = 1e-4,
    diagnosis: Diagnosis = CLEAN,
    device_type: str = "cpu",
    repeats: int = 12,
    cpu_cores: int = 2,
) -> CheckContext:
    """What compare hands every check, around synthetic runs."""
    return CheckContext(
        runs=tuple(runs),
        tolerance=tolerance,
        diagnosis=diagnosis,
        device_type=device_type,
        repeats=repeats,
        cpu_cores=cpu_cores,
    )


def comm(exposed_share: float, reduced: int = 2_000_000, grads: int = 2_000_000) -> dict[str, Any]:
    """A ddp run's profile: one all-reduce per step."""
    step = 10.0
    return {
        "collectives": [
            {"op": "all_reduce", "count_per_step": 1.0, "ms_per_step": 1.0},
            {"op": "broadcast", "count_per_step": 0.0, "ms_per_step": 0.0},
        ],
        "bytes_all_reduced_per_step": reduced,
        "gradient_bytes": grads,
        "step_ms": step,
        "step_ms_without_sync": step * (1 - exposed_share),
        "exposed_ms": step * exposed_share,
        "exposed_share": exposed_share,
    }


def fsdp_comm(exposed_share: float, grads: int = 2_000_000, units: int = 3) -> dict[str, Any]:
    """An fsdp run's profile: per unit, an all-gather in forward and backward (the root's once)
    and a reduce-scatter; nothing all-reduced."""
    step = 10.0
    gathers = 2 * units - 1
    return {
        "collectives": [
            {"op": "all_reduce", "count_per_step": 0.0, "ms_per_step": 0.0},
            {"op": "broadcast", "count_per_step": 0.0, "ms_per_step": 0.0},
            {"op": "all_gather", "count_per_step": float(gathers), "ms_per_step": 2.0},
            {"op": "reduce_scatter", "count_per_step": float(units), "ms_per_step": 1.0},
        ],
        "bytes_all_reduced_per_step": 0.0,
        "bytes_all_gathered_per_step": 2.0 * grads,
        "bytes_reduce_scattered_per_step": float(grads),
        "gradient_bytes": grads,
        "step_ms": step,
        "step_ms_without_sync": step * (1 - exposed_share),
        "exposed_ms": step * exposed_share,
        "exposed_share": exposed_share,
    }
