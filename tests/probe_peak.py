"""The peak live tensor bytes compare's probe records for the single-process run (CPU): what the
memory estimate is measured against (tests/test_estimate.py, bench/estimate_accuracy.py)."""

from __future__ import annotations

import tempfile
from dataclasses import replace
from pathlib import Path

from dpwise.compare.matrix import RunSpec
from dpwise.compare.measurement import profiled_probe
from dpwise.compare.settings import CompareConfig
from dpwise.compare.worker import _plan
from dpwise.launch.env import DistEnv
from dpwise.strategies import make_strategy, reference
from dpwise.workload.spec import workload_for


def single_process_peak(cfg: CompareConfig, profile_steps: int = 2) -> int:
    name = reference()
    spec = RunSpec(name, name, name, 1, "cpu")
    plan = _plan(spec, replace(cfg, device="cpu"), DistEnv())  # resolved as compare resolves it
    workload = workload_for(cfg)
    with tempfile.TemporaryDirectory() as tmp:
        probe = profiled_probe(
            spec,
            plan,
            make_strategy(plan.strategy, DistEnv()),
            workload,
            workload.load_data(cfg.seed),
            Path(tmp) / "trace.json",
            profile_steps,
        )
    return probe["live_tensor_bytes"]
