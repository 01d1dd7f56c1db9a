"""What each process of one comparison run executes; rank 0 returns the run's record."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from dpwise.compare.matrix import RunSpec
from dpwise.compare.probe import profiled_probe, save_final, timed_repeats
from dpwise.compare.progress import ProgressWriter
from dpwise.compare.settings import CompareConfig
from dpwise.env import DistEnv
from dpwise.plan import Hardware, RunPlan
from dpwise.strategies import DataParallelStrategy, DDPStrategy, SingleStrategy
from dpwise.strategies.base import Strategy
from dpwise.workload import workload_for

PROGRESS_FILE = ".progress"


def _backend(spec: RunSpec) -> str:
    return "nccl" if spec.device_type == "cuda" else "gloo"


def _strategy(spec: RunSpec, env: DistEnv, ddp_options: dict | None = None) -> Strategy:
    if spec.strategy == "ddp":
        return DDPStrategy(env, _backend(spec), spec.device_type, options=ddp_options)
    if spec.strategy == "dp":
        return DataParallelStrategy(spec.world_size if spec.device_type == "cuda" else 0)
    device = torch.device("cuda", 0) if spec.device_type == "cuda" else torch.device("cpu")
    return SingleStrategy(device)


def _plan(spec: RunSpec, cfg: CompareConfig) -> RunPlan:
    train = cfg.train_config(spec.strategy, spec.world_size)
    ddp = spec.strategy == "ddp"
    return RunPlan(
        config=train,
        device_type=spec.device_type,
        backend=_backend(spec) if ddp else None,
        nproc_per_node=spec.world_size if ddp else 1,
        world_size=spec.world_size if ddp else 1,
        dp_devices=spec.world_size if spec.strategy == "dp" and spec.device_type == "cuda" else 0,
        launch=False,
    )


def _local_group(spec: RunSpec) -> bool:
    """ddp × 1 runs in this process: a one-member process group on an in-memory store."""
    if spec.strategy != "ddp" or spec.launched or dist.is_initialized():
        return False
    dist.init_process_group(_backend(spec), store=dist.HashStore(), rank=0, world_size=1)
    return True


def _threads(spec: RunSpec) -> int:
    if spec.launched and "OMP_NUM_THREADS" not in os.environ:
        torch.set_num_threads(max(1, Hardware.detect().cpu_cores // spec.world_size))
    return torch.get_num_threads()


def measure_run(spec: RunSpec, cfg: CompareConfig) -> dict[str, Any] | None:
    env = DistEnv.from_environ()
    threads = _threads(spec)
    plan = _plan(spec, cfg)
    workload = workload_for(cfg)
    data = workload.load_data(cfg.seed)
    own_group = _local_group(spec)
    strategy = _strategy(spec, env, cfg.ddp_options)
    strategy.setup()
    try:
        progress = ProgressWriter(cfg.out / PROGRESS_FILE, spec.id, strategy.is_main)
        timing, first = timed_repeats(plan, strategy, workload, data, cfg.repeats, progress)
        final = Path("runs") / spec.id / "final.pt"
        if strategy.is_main:
            save_final(first, cfg.out / final)
        with tempfile.TemporaryDirectory() as tmp:
            trace = Path("traces") / f"{spec.id}.rank0.json"
            where = cfg.out / trace if strategy.is_main else Path(tmp) / "trace.json"
            probe = profiled_probe(spec, plan, strategy, workload, data, where, cfg.profile_steps)
        progress.emit("probe")
        mine = {
            "live": probe.get("live_tensor_bytes"),
            "rss": timing["peak_rss_bytes"],
            "device": str(strategy.device),
        }
        ranks = strategy.all_gather_object(mine)
    finally:
        strategy.teardown()
        if own_group:
            dist.destroy_process_group()
        if spec.device_type == "cuda":
            torch.cuda.empty_cache()  # in-process runs must not hold GPU 0 for the next run
    if not strategy.is_main:
        return None
    return _record(spec, strategy, threads, timing, first, probe, ranks, final, trace)


def _memory(spec: RunSpec, first: Any, ranks: list[dict[str, Any]]) -> dict[str, Any]:
    if spec.device_type == "cuda":
        per_device = [
            {"rank": p["rank"], "device": p["device"], "peak_bytes": p["bytes"]}
            for p in first.result.peak_memory
        ]
        kind = "cuda_max_memory_allocated"
    else:
        per_device = [
            {"rank": r, "device": "cpu", "peak_bytes": m["live"]} for r, m in enumerate(ranks)
        ]
        kind = "cpu_live_tensors"
    return {"kind": kind, "per_device": per_device, "peak_rss_bytes": [m["rss"] for m in ranks]}


def _record(spec, strategy, threads, timing, first, probe, ranks, final, trace) -> dict[str, Any]:
    facts = strategy.describe()
    return {
        "id": spec.id,
        "label": spec.label,
        "strategy": spec.strategy,
        "world_size": spec.world_size,
        "backend": facts["backend"],
        "devices": [m["device"] for m in ranks] if spec.strategy == "ddp" else facts["devices"],
        "threads_per_process": threads,
        "notes": list(facts["notes"]),
        "epoch_seconds": timing["epoch_seconds"],
        "samples_per_s": timing["samples_per_s"],
        "samples_per_epoch": timing["samples_per_epoch"],
        "training_seconds": timing["training_seconds"],
        "losses": first.result.losses,
        "final_state": str(final),
        "memory": _memory(spec, first, ranks),
        "communication": probe.get("communication"),
        "sync_points_per_step": probe.get("sync_points_per_step"),
        "trace": str(trace),
    }


def single_process_peak(cfg: CompareConfig, profile_steps: int = 2) -> int:
    """The peak live tensor bytes compare's probe records for the single-process run (CPU)."""
    spec = RunSpec("single", "single", "single", 1, "cpu")
    workload = workload_for(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        probe = profiled_probe(
            spec,
            _plan(spec, cfg),
            _strategy(spec, DistEnv()),
            workload,
            workload.load_data(cfg.seed),
            Path(tmp) / "trace.json",
            profile_steps,
        )
    return probe["live_tensor_bytes"]
