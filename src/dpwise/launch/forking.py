"""How dpwise starts the processes it runs: forked from one server that has imported torch.

Every process dpwise starts (a launched worker of ddp, fsdp or probe-link, a compare run, a
`migrate --verify` run) needs torch, and torch._dynamo, which the first optimizer a process
builds imports: about three seconds of a core each on a small machine, paid once per process
with spawn. A fork server imports them once, runs nothing (no threads, no CUDA), and forks each
process from there: as clean as spawn, without paying the imports again. Its first import
(``unfrozen``) turns the garbage collector off for the imports; its last (``frozen``) takes what
they made out of the collector's sight and turns it back on. A command that will start
processes starts the server first thing, so that its imports overlap the command's own.
Spawn where there is no fork server (Windows).

A forked process gets the parent's sys.path, argv and working folder from multiprocessing (as
spawn does), but its environment is the server's, as it was when the server started. A
launched worker therefore takes the parent's environment at launch time (``AsParent``), keeping
only what the launcher set for it since the fork (its rank, its store, its error file …).

A process the server forked (a compare run) that launches workers of its own forks them from the
same server (``lend`` in the parent, ``borrow`` in the child): a server of its own would import
torch again (three to five seconds of a core per launched run).

Nothing it starts outlives the command, however it ends (``launch.tether``): the kernel ends
the server when the command dies (PR_SET_PDEATHSIG), and every process the server forks when the
server dies, so a kill -9 of the command ends the whole tree, the way a clean exit does. A
process group would not do it: a kill -9 reaches one process, and nobody would be left to signal
the group; a watcher thread in each process would miss a stopped or hung command. The server,
told of the command's death, first ends its children and removes the command's temporary
folders (``infra.scratch``), then exits.

Nor does a process outlive the process that asked the server for it (``tether``): a
launched worker ends with its launcher (a compare run's elastic agent), not only with the server,
which is its parent for the kernel. multiprocessing gives the started process the read end of a
pipe whose only writer is the process that started it (its ``parent_process().sentinel``); the
started process asks the kernel for SIGKILL when that pipe's last writer closes (O_ASYNC with
F_SETSIG), which the kernel does as the starter dies, however it dies: a worker does not stay on
complaining that its launcher's store is gone. No thread: a worker stuck in a collective or in
C++ is ended all the same.

Torch-free: imported before torch is, and by the server first of all.
"""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import multiprocessing.context
import os
import signal
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypedDict

from dpwise.launch import tether  # noqa: F401  (the server's preload imports it here)

# The environment this module was imported with: in the fork server, the server's own (this
# module is its first import), which every process it forks starts from.
BASELINE = dict(os.environ)
_IMPORTED_IN = os.getpid()
_STOP_AT_EXIT: list[Any] = []  # the exit hook, once registered
_BORROWED: list[int] = []  # the pid of the parent's server this process forks from (borrow)
# What the server imports before it forks anything; a command adds its own worker module.
PRELOAD = ["dpwise.launch.forking", "torch", "torch._dynamo"]
# Its first import turns the collector off for the imports (unfrozen.py); its last one freezes
# their objects out of the collector's sight and turns it back on (frozen.py).
UNFREEZE = "dpwise.launch.unfrozen"
FREEZE = "dpwise.launch.frozen"


def start_method() -> str:
    """The start method: "forkserver" where the platform has one, else "spawn"."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def context(
    *modules: str,
) -> multiprocessing.context.SpawnContext | multiprocessing.context.ForkServerContext:
    """multiprocessing's context for dpwise's processes; ``modules`` join the server's imports
    when it has not started yet."""
    if start_method() == "spawn":
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(
        [UNFREEZE, *PRELOAD, *[m for m in modules if m not in PRELOAD], FREEZE]
    )
    return ctx


def import_as_server(*modules: str) -> None:
    """In a process that is its own worker (one a scheduler started per device, where no
    server forks it), the server's imports and ``modules``, as the server makes them: with the
    garbage collector off (they make no garbage; its collections during them cost about a
    fifth of them), then out of its sight (``frozen``), so that ddp's teardown collection and
    the exit's walk only what the training made."""
    import gc
    import importlib

    was_on = gc.isenabled()
    gc.disable()
    try:
        for name in [*PRELOAD, *modules]:
            importlib.import_module(name)
    finally:
        gc.freeze()
        if was_on:
            gc.enable()


def ensure_running(*modules: str) -> None:
    """Start the fork server now if it is not running (its imports go on in the background); a
    no-op where there is none. Its SIGINT and SIGTERM are held, and so are those of every process
    it forks, until the process is ready (``interrupts.release``): a Ctrl-C during the imports
    waits instead of printing a traceback from the middle of one. It is stopped when this process
    exits (it would otherwise finish its imports first, outliving a command that failed early)."""
    if context(*modules).get_start_method() != "forkserver" or _BORROWED:
        return
    from multiprocessing import forkserver

    from dpwise.infra.interrupts import children_held

    _short_socket_folder()
    _quiet_resource_tracker()
    with children_held():
        forkserver.ensure_running()
    if not _STOP_AT_EXIT:
        _STOP_AT_EXIT.append(atexit.register(stop_now))


# multiprocessing's resource tracker (one per command, started with the server) removes what a
# process killed with SIGKILL left registered (a launcher's queues and locks), and says so with a
# warning once the command has ended, after the command's one line: removing them is all it needs.
_TRACKER_QUIET = "ignore::UserWarning:multiprocessing.resource_tracker"


def _quiet_resource_tracker() -> None:
    """Start multiprocessing's resource tracker (the server's start would) without its warnings:
    it is started with this process's -W options, and this one added for the start only."""
    import sys
    from multiprocessing import resource_tracker

    sys.warnoptions.append(_TRACKER_QUIET)
    try:
        resource_tracker.ensure_running()
    finally:
        sys.warnoptions.remove(_TRACKER_QUIET)


# A Unix socket's path holds at most 107 bytes; multiprocessing puts the server's socket at
# TMPDIR/pymp-XXXXXXXX/listener-XXXXXXXX (about 35 bytes below TMPDIR).
_SOCKET_PATH_MAX = 107
_SOCKET_BELOW_TMPDIR = 40


def _short_socket_folder() -> None:
    """Where TMPDIR is too long for the server's socket (a deep job folder, a test's temporary
    path), multiprocessing would fail with `OSError: AF_UNIX path too long`: its folder is made
    in a short system temporary folder instead, removed at exit as multiprocessing removes its
    own (and by the orphaned server after a kill -9: it keeps the `pymp-` name)."""
    import shutil
    import tempfile
    from multiprocessing import process, util

    config = process.current_process()._config  # type: ignore[attr-defined]  # multiprocessing's private settings (its tempdir), read as its own code does
    fits = len(tempfile.gettempdir()) + _SOCKET_BELOW_TMPDIR < _SOCKET_PATH_MAX
    if config.get("tempdir") or fits:
        return
    for base in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(base) and os.access(base, os.W_OK | os.X_OK):
            folder = tempfile.mkdtemp(prefix="pymp-", dir=base)
            remove = util._remove_temp_dir  # type: ignore[attr-defined]  # multiprocessing's own clean-up of its tempdir
            util.Finalize(None, remove, args=(shutil.rmtree, folder), exitpriority=-100)
            config["tempdir"] = folder
            return


def stop_now() -> None:
    """Kill the fork server (an interrupted command does not wait for its imports to end).

    It would stop by itself once its imports are done and it sees this process gone; its SIGINT
    is held meanwhile, so it is killed. A no-op where there is none.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    pid = getattr(server, "_forkserver_pid", None)
    if not pid or pid in _BORROWED:  # a borrowed server is its owner's to stop
        return
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(OSError):  # reaps it and forgets it: a later start is a fresh one
        server._stop()  # type: ignore[union-attr]  # a pid above: the server exists


def server_pid() -> int | None:
    """The fork server's process id while this process has one running, else None: the parent
    of every worker this process forks through it."""
    from multiprocessing import forkserver

    return getattr(getattr(forkserver, "_forkserver", None), "_forkserver_pid", None)


class Lent(TypedDict, total=False):
    """The fork server's state a borrower takes over (_forkserver_authkey: Python 3.14's
    handshake; absent before)."""

    _forkserver_address: str
    _forkserver_pid: int
    _forkserver_authkey: bytes


def lend() -> Lent | None:
    """What a process forked from this process's server needs to fork from it too (``borrow``):
    the server's socket, pid and key; None where no server runs."""
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    lent: Lent = {}
    for name in _SERVER_FIELDS:
        if hasattr(server, name):
            lent[name] = getattr(server, name)
    if not lent.get("_forkserver_pid") or not lent.get("_forkserver_address"):
        return None
    return lent


_SERVER_FIELDS: tuple[Literal["_forkserver_address", "_forkserver_pid", "_forkserver_authkey"], ...]
_SERVER_FIELDS = ("_forkserver_address", "_forkserver_pid", "_forkserver_authkey")


def borrow(lent: Lent | None) -> bool:
    """In a process the server forked: start later processes from that server (``lend``'s).

    multiprocessing gives such a process the server's liveness pipe but not its socket, so
    its first start would launch a server of its own. Here it takes the socket; it never
    restarts or stops that server (its owner does). False (nothing changed) where this process
    was not forked by a fork server, or already has one.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    if (
        not lent
        or server is None
        or getattr(server, "_forkserver_pid", None) is not None
        or getattr(server, "_forkserver_alive_fd", None) is None  # not forked by a server
    ):
        return False
    for name, value in lent.items():
        setattr(server, name, value)
    # its check (waitpid) works for the server's parent only; the server outlives this process
    server.ensure_running = _nothing
    _BORROWED.append(lent["_forkserver_pid"])
    return True


def _nothing() -> None:
    return None


class AsParent:
    """``fn``, run with the environment the parent had when it made this object, and ``extra``
    variables on top (what this launch alone gives its workers).

    Picklable: multiprocessing sends it to the started process, which calls it.
    """

    def __init__(self, fn: Callable[..., Any], extra: Mapping[str, str] | None = None) -> None:
        self.fn = fn
        # torch's launcher names the entry point after the function
        self.__name__ = getattr(fn, "__name__", "worker")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", __name__)
        self.environ = dict(os.environ)
        self.extra = dict(extra or {})

    def __call__(self, *args: Any) -> Any:
        adopt(self.environ)
        os.environ.update(self.extra)
        return self.fn(*args)


def adopt(environ: dict[str, str]) -> None:
    """This process's environment becomes ``environ``, plus what was set in it since it was
    forked from the server (the launcher's variables for this worker).

    Where this module was first imported here rather than in the server (a server dpwise did not
    start), nothing tells the server's variables from the launcher's: the process keeps its own
    and only gains the parent's that it lacks.
    """
    if os.getpid() == _IMPORTED_IN:
        for key, value in environ.items():
            os.environ.setdefault(key, value)
        return
    own = {k: v for k, v in os.environ.items() if BASELINE.get(k) != v}
    os.environ.clear()
    os.environ.update(environ)
    os.environ.update(own)
