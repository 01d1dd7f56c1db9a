"""Start DDP workers through torch.distributed's own elastic launcher (what torchrun runs)."""

from __future__ import annotations

import faulthandler
import logging
import os
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from dpwise.config import TrainConfig
from dpwise.errors import DpwiseError
from dpwise.plan import RunPlan

_USAGE_PREFIX = "DpwiseError: "
TEARDOWN_LIMIT_S = 120.0  # a healthy teardown takes well under a second
_WATCHDOG_DIR = "DPWISE_TEARDOWN_WATCHDOG_DIR"  # where launched workers write a stuck teardown
_TIMEOUT_MARK = "Timeout ("  # how faulthandler's timed dump begins
# torch's c10d rendezvous hands every restart of the workers the same agent-hosted TCPStore,
# keys of the dead attempt included (a gloo peer's address, an NCCL id), while the workers
# read those keys unprefixed: a restarted worker can connect to its dead peer's port
# ("Gloo connectFullMesh failed ... Connection refused"; pytorch#135712). torch's own
# opt-out makes worker rank 0 host a new store, on a new port, for every attempt.
_FRESH_STORE_PER_ATTEMPT = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


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
    fresh_store = "1" if plan.config.max_restarts > 0 else os.environ.get(_FRESH_STORE_PER_ATTEMPT)
    with (
        tempfile.TemporaryDirectory(prefix="dpwise-watchdog-") as watch,
        _environ(_WATCHDOG_DIR, watch),
        _environ(_FRESH_STORE_PER_ATTEMPT, fresh_store),
    ):
        try:
            return elastic_launch(launch_config(plan), entrypoint)(*args)
        except ChildFailedError as exc:
            rank, failure = exc.get_first_failure()
            stuck = stuck_teardown(Path(watch))
            if stuck is not None:
                raise WorkerFailed(*stuck) from None
            message, details = _failure_text(failure.message)
            if message.startswith(_USAGE_PREFIX):
                raise DpwiseError(message[len(_USAGE_PREFIX) :]) from None
            raise WorkerFailed(rank, failure.exitcode, message, details) from None


@contextmanager
def _environ(name: str, value: str | None) -> Iterator[None]:
    """Set a variable the workers inherit, for the duration of one launch (None: leave it)."""
    before = os.environ.get(name)
    if value is not None:
        os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


# -- the teardown watchdog --------------------------------------------------------------------
_watchdog_file: IO[str] | None = None


def arm_teardown_watchdog(rank: int) -> None:
    """If this process has not disarmed within TEARDOWN_LIMIT_S, dump every stack and exit 1.

    Armed once the outputs are written, around the process group's teardown, so a teardown
    that hangs (the gloo/DDP destructor deadlock of pytorch#56297) is reported instead of
    hanging forever. faulthandler's timer is a C thread: it fires even while the main thread
    is stuck in a destructor holding the GIL, where no Python thread could run.
    """
    global _watchdog_file
    folder = os.environ.get(_WATCHDOG_DIR)
    target: IO[str] = _stderr()
    if folder and Path(folder).is_dir():
        _watchdog_file = open(Path(folder) / f"teardown.{rank}.txt", "w")  # noqa: SIM115
        target = _watchdog_file
    faulthandler.dump_traceback_later(TEARDOWN_LIMIT_S, exit=True, file=target)


def _stderr() -> IO[str]:
    """sys.stderr when it has a file descriptor (faulthandler needs one), else the process's."""
    try:
        sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return sys.__stderr__
    return sys.stderr


def disarm_teardown_watchdog() -> None:
    global _watchdog_file
    faulthandler.cancel_dump_traceback_later()
    if _watchdog_file is not None:
        _watchdog_file.close()
        _watchdog_file = None


def stuck_teardown(folder: Path) -> tuple[int, int, str, str] | None:
    """WorkerFailed's arguments when a worker's watchdog fired, else None."""
    for dump in sorted(folder.glob("teardown.*.txt")):
        text = dump.read_text(errors="replace")
        if _TIMEOUT_MARK in text:
            message = (
                f"teardown did not finish within {TEARDOWN_LIMIT_S:.0f} s after training "
                "finished and rank 0 wrote its outputs; the stuck worker's stacks are above"
            )
            return int(dump.stem.split(".")[1]), 1, message, text
    return None


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
