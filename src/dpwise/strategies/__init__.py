"""Strategies: single, dp and ddp behind one interface (see base.Strategy)."""

from __future__ import annotations

from dpwise.launch_env import DistEnv
from dpwise.plan import RunPlan
from dpwise.strategies.base import Strategy
from dpwise.strategies.ddp import DDPStrategy
from dpwise.strategies.dp import DataParallelStrategy
from dpwise.strategies.single import SingleStrategy

__all__ = ["DDPStrategy", "DataParallelStrategy", "SingleStrategy", "Strategy", "make_strategy"]


def make_strategy(plan: RunPlan, env: DistEnv) -> Strategy:
    import torch

    name = plan.config.strategy
    if name == "ddp":
        return DDPStrategy(
            env,
            plan.backend or "gloo",
            plan.device_type,
            timeout_s=plan.config.timeout,
            options=plan.config.ddp_options,
        )
    if name == "dp":
        return DataParallelStrategy(plan.dp_devices)
    device = torch.device("cuda", 0) if plan.device_type == "cuda" else torch.device("cpu")
    return SingleStrategy(device)
