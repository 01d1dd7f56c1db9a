"""The peak live tensor bytes compare's probe records for the single-process run (CPU): what the
memory estimate is measured against (tests/test_estimate.py, bench/estimate_accuracy.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from dpwise.compare.matrix import RunSpec
from dpwise.compare.probe import profiled_probe
from dpwise.compare.settings import CompareConfig
from dpwise.plan import RunPlan
from dpwise.strategies import SingleStrategy
from dpwise.workload import workload_for


def single_process_peak(cfg: CompareConfig, profile_steps: int = 2) -> int:
    spec = RunSpec("single", "single", "single", 1, "cpu")
    plan = RunPlan(
        config=cfg.train_config("single", 1),
        device_type="cpu",
        backend=None,
        nproc_per_node=1,
        world_size=1,
        dp_devices=0,
        launch=False,
    )
    workload = workload_for(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        probe = profiled_probe(
            spec,
            plan,
            SingleStrategy(torch.device("cpu")),
            workload,
            workload.load_data(cfg.seed),
            Path(tmp) / "trace.json",
            profile_steps,
        )
    return probe["live_tensor_bytes"]
