"""Start DDP workers through torch.distributed's own elastic launcher (what torchrun runs)."""

from __future__ import annotations

import logging
import os
import sys
import uuid
from collections.abc import Callable
from typing import Any

from dpwise.config import TrainConfig
from dpwise.errors import DpwiseError
from dpwise.plan import RunPlan

_USAGE_PREFIX = "DpwiseError: "


class WorkerFailed(Exception):
    """A worker died; carries the worker's own error text (traceback where recorded)."""

    def __init__(self, rank: int, exitcode: int, message: str, details: str) -> None:
        super().__init__(f"worker rank {rank} failed (exit code {exitcode}): {message}")
        self.rank, self.exitcode, self.details = rank, exitcode, details


def launch_config(plan: RunPlan) -> Any:
    from torch.distributed.launcher.api import LaunchConfig

    cfg: TrainConfig = plan.config
    rdzv_configs: dict[str, Any] = {}
    if cfg.rdzv_backend == "static":
        rdzv_configs["rank"] = cfg.node_rank
    return LaunchConfig(
        min_nodes=cfg.nnodes,
        max_nodes=cfg.nnodes,
        nproc_per_node=plan.nproc_per_node,
        # Nodes of one job meet under one id; a single-node run gets a fresh one, as --standalone.
        run_id=cfg.rdzv_id if cfg.rdzv_endpoint else str(uuid.uuid4()),
        role="dpwise",
        rdzv_backend=cfg.rdzv_backend,
        rdzv_endpoint=cfg.rdzv_endpoint or "localhost:0",  # port 0: a free loopback port
        rdzv_configs=rdzv_configs,
        max_restarts=cfg.max_restarts,
        monitor_interval=0.1,
        start_method="spawn",
    )


def launch(plan: RunPlan, entrypoint: Any, *args: Any) -> dict[int, Any]:
    """Run ``entrypoint(*args)`` in every worker; return {global rank: return value}."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import elastic_launch

    for name in ("torch.distributed.elastic", "torch.multiprocessing"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # dpwise reports failures itself
    try:
        return elastic_launch(launch_config(plan), entrypoint)(*args)
    except ChildFailedError as exc:
        rank, failure = exc.get_first_failure()
        message, details = _failure_text(failure.message)
        if message.startswith(_USAGE_PREFIX):
            raise DpwiseError(message[len(_USAGE_PREFIX) :]) from None
        raise WorkerFailed(rank, failure.exitcode, message, details) from None


def run_guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """Run a worker's function; a DpwiseError becomes one line for the parent and exit code 2.

    The message goes to the launcher's error file (no traceback on the console), and the non-zero
    exit makes the launcher stop the other workers instead of leaving them waiting in a collective.
    """
    try:
        return fn(*args)
    except DpwiseError as exc:
        from torch.distributed.elastic.multiprocessing.errors import get_error_handler

        get_error_handler().record_exception(exc)
        sys.stderr.flush()
        os._exit(2)


def _failure_text(message: Any) -> tuple[str, str]:
    """(one-line message, traceback) from what the worker's error file recorded."""
    if isinstance(message, dict):
        extra = message.get("extraInfo") or {}
        return str(message.get("message", "")), str(extra.get("py_callstack", ""))
    if not message or "enable traceback" in str(message):
        return "it left no Python error (killed by a signal, os._exit or a native crash)", ""
    return str(message), ""
