"""Run the link probe in launched processes: dpwise's launcher starts them, the ddp strategy
sets up their process group (backend, device, timeouts) exactly as `dpwise train` does."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.launch.elastic import launch, run_guarded
from dpwise.launch.env import DistEnv
from dpwise.link.probe import probe_link
from dpwise.link.settings import ProbeLinkConfig
from dpwise.train.plan import RunPlan, resolve


def _expected_world(cfg: ProbeLinkConfig, hw: Hardware, env: DistEnv) -> int:
    """The world size the launch will have (resolve's rule for --nproc's default)."""
    if env.under_launcher:
        return env.world_size
    device = cfg.device if cfg.device != "auto" else ("cuda" if hw.cuda_devices else "cpu")
    nproc = cfg.nproc or (hw.cuda_devices if device == "cuda" else 2)
    return nproc * cfg.nnodes


def plan_for(cfg: ProbeLinkConfig, env: DistEnv) -> RunPlan:
    hw = Hardware.detect()
    return resolve(cfg.train_config(_expected_world(cfg, hw, env)), hw, env)


LONG_PROBE_S = 2.0  # progress lines only once a probe has taken this long


def _progress() -> Callable[[str], None]:
    started = time.perf_counter()

    def say(line: str) -> None:
        if time.perf_counter() - started > LONG_PROBE_S:
            print(f"probe-link: {line}", file=sys.stderr, flush=True)

    return say


def probe_worker(cfg: ProbeLinkConfig, quiet: bool = False) -> dict[str, Any]:
    """One process of the probe: join the group, measure, leave. Returns the probe's result
    (the same on every process)."""
    from dpwise.strategies import make_strategy

    env = DistEnv.from_environ()
    plan = plan_for(cfg, env)
    configure_threads(None, plan.nproc_per_node)
    strategy = make_strategy(plan.strategy, env)
    strategy.setup()
    try:
        talk = None if quiet or env.rank != 0 else _progress()
        result = probe_link(cfg.max_bytes, cfg.ops, device=strategy.device, progress=talk)
    finally:
        strategy.teardown()
    return result


def probe_entry(cfg: ProbeLinkConfig, quiet: bool) -> dict[str, Any]:
    return run_guarded(probe_worker, cfg, quiet)


def run_probe(cfg: ProbeLinkConfig, quiet: bool = False) -> tuple[dict[str, Any] | None, bool]:
    """The probe's result and whether this node holds global rank 0 (the one that writes):
    launched here (every node gets the result), or run in this process when it is itself a
    torchrun worker (only rank 0 gets it: one table, not one per worker)."""
    env = DistEnv.from_environ()
    plan = plan_for(cfg, env)  # bad launch settings fail here, before anything starts
    if not plan.launch:
        result = probe_worker(cfg, quiet)
        return (result, True) if env.rank == 0 else (None, False)
    returned = launch(plan.launch_settings, probe_entry, cfg, quiet)
    return next(iter(returned.values())), 0 in returned
