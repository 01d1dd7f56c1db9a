"""Running a user's script under `dpwise watch`: the script as its launcher would run it, each of
its ranks with a watcher beside it (dpwise.measure.rankwatch), and the processes a script spawns
itself (mp.spawn) each watched as a rank."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from dpwise.measure.rankwatch import FOLDER, Watcher

CWD = "DPWISE_WATCH_CWD"  # the folder the user started the job in
SPAWNS = "DPWISE_WATCH_SPAWNS"  # set: the script starts its own processes (mp.spawn)


@dataclass(frozen=True)
class _Child:
    """What a process the script spawned runs: its function, under a watcher of its own."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]


def _spawned(index: int, child: _Child) -> None:
    """A process the script spawned: its watcher (its spawn index as its rank until its process
    group says), then the script's function."""
    watcher = Watcher(os.environ[FOLDER], index).start()
    ended, error = "returned", None
    try:
        child.fn(index, *child.args)
    except SystemExit as exc:
        ended = f"exited with code {exc.code if isinstance(exc.code, int) else 1}"
        raise
    except BaseException as exc:
        ended, error = f"raised {type(exc).__name__}: {exc}", exc
        raise
    finally:
        watcher.stop(ended, error)


def _spawning() -> None:
    """The script's `torch.multiprocessing.spawn` and `start_processes` start processes that
    run under a watcher each (forked where the platform can and CUDA is not yet initialized:
    the script's functions, defined in a script run as `__main__`, need not pickle)."""
    module = sys.modules["torch.multiprocessing.spawn"]
    start = module.start_processes

    def start_processes(
        fn: Callable[..., Any],
        args: tuple[Any, ...] = (),
        nprocs: int = 1,
        join: bool = True,
        daemon: bool = False,
        start_method: str = "spawn",
    ) -> Any:
        fork = "fork" in multiprocessing.get_all_start_methods() and not (
            torch.cuda.is_available() and torch.cuda.is_initialized())  # fmt: skip
        method = "fork" if fork else start_method
        return start(_spawned, (_Child(fn, tuple(args)),), nprocs, join, daemon, method)

    module.start_processes = start_processes  # type: ignore[attr-defined]  # on purpose
    torch.multiprocessing.start_processes = start_processes


def worker(argv: list[str]) -> None:
    """What each process of a watched job runs (the launcher's entry point)."""
    from dpwise.launch.elastic import run_guarded

    run_guarded(_watched, argv)


def _watched(argv: list[str]) -> None:
    """The script as its launcher would run it (its folder first on the path, its arguments,
    the user's folder), with the watcher beside it; the script's end is its own."""
    import runpy

    script = argv[0]
    os.chdir(os.environ.get(CWD) or os.getcwd())
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    sys.argv = list(argv)
    if os.environ.get(SPAWNS):  # the script's own processes are the ranks: only they are watched
        from dpwise.userscript.harness import LAUNCHER_VARS

        for name in LAUNCHER_VARS:  # it sets its own: the launcher's are not its
            os.environ.pop(name, None)
        _spawning()
        runpy.run_path(script, run_name="__main__")
        return
    watcher = Watcher(os.environ[FOLDER], int(os.environ.get("RANK", "0"))).start()
    ended, error = "returned", None
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as exc:
        ended = f"exited with code {exc.code if isinstance(exc.code, int) else 1}"
        raise
    except BaseException as exc:
        ended, error = f"raised {type(exc).__name__}: {exc}", exc
        raise
    finally:
        watcher.stop(ended, error)
