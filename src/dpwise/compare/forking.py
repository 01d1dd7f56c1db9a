"""How compare starts its run processes: forked from a server that has imported torch.

Every run process needs torch, and torch._dynamo, which the first optimizer a process builds
imports: about three seconds of a core each time. A fork server imports them once, runs nothing (no
threads, no CUDA), and forks each run process from there: as clean as spawn, without paying the
imports once per run. The command starts the server first thing, so its imports overlap the
parent's own.
Spawn where there is no fork server (Windows). Torch-free: imported before torch is.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.context

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

        forkserver.ensure_running()
