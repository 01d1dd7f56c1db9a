"""Run every configuration of a comparison: in this process, or in workers the launcher starts."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from dpwise.compare.matrix import RunSpec, build_matrix
from dpwise.compare.progress import ProgressTail
from dpwise.compare.settings import CompareConfig
from dpwise.compare.worker import PROGRESS_FILE, measure_run
from dpwise.env import DistEnv
from dpwise.launch import launch, run_guarded
from dpwise.plan import Hardware, resolve


def compare_entry(spec: RunSpec, cfg: CompareConfig) -> dict[str, Any] | None:
    """The function each launched worker runs."""
    return run_guarded(measure_run, spec, cfg)


def run_one(spec: RunSpec, cfg: CompareConfig, hw: Hardware) -> dict[str, Any]:
    if not spec.launched:
        return measure_run(spec, cfg)
    plan = resolve(cfg.train_config("ddp", spec.world_size), hw, DistEnv())
    return launch(plan, compare_entry, spec, cfg)[0]


def run_all(
    cfg: CompareConfig, hw: Hardware, on_event: Callable[[dict[str, Any]], None]
) -> tuple[list[RunSpec], list[dict[str, Any]]]:
    """Measure every run in order; ``on_event`` sees start / repeat / probe / done events."""
    specs = build_matrix(cfg, hw)
    cfg.out.mkdir(parents=True, exist_ok=True)
    records = []
    with ProgressTail(cfg.out / PROGRESS_FILE, on_event):
        for spec in specs:
            on_event({"run": spec.id, "what": "start", "label": spec.label})
            start = time.perf_counter()
            record = run_one(spec, cfg, hw)
            record["wall_seconds"] = time.perf_counter() - start
            records.append(record)
            on_event({"run": spec.id, "what": "done"})
    return specs, records
