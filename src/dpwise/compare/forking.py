"""How compare starts its run processes: forked from a server that has imported torch.

Every run process needs torch, and torch._dynamo, which the first optimizer a process builds
imports: about three seconds of a core each time. A fork server imports them once, runs nothing (no
threads, no CUDA), and forks each run process from there: as clean as spawn, without paying the
imports once per run. The command starts the server first thing, so its imports overlap the
parent's own.
Spawn where there is no fork server (Windows). Torch-free: imported before torch is.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import multiprocessing.context
import os
import signal

PRELOAD = ["torch", "torch._dynamo", "dpwise.compare.worker"]


def context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    return ctx


def start_early() -> None:
    """Start the fork server now (it imports in the background); a no-op where there is none."""
    if context().get_start_method() == "forkserver":
        from multiprocessing import forkserver

        from dpwise.infra.interrupts import children_held

        # A Ctrl-C during its imports waits; each run process releases it (run_process).
        with children_held():
            forkserver.ensure_running()


def stop_now() -> None:
    """Kill the fork server (an interrupted compare does not wait for its imports to end).

    It would stop by itself once its imports are done and it sees this process gone; its SIGINT
    is held meanwhile, so it is killed. A no-op where there is none.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if pid:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
