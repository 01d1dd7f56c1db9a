"""The tether: nothing dpwise starts outlives the command, nor the process that asked for it.

Imported by ``launch.forking``, so by the fork server's preload first of all: there the server
asks the kernel to signal it when the command dies (PR_SET_PDEATHSIG) and has every process it
forks end with its parent, and with the process that started it (``_tie_to_parent``). See
``launch.forking``'s docstring for why this way. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import signal
from types import FrameType
from typing import Any

from dpwise.infra import scratch
from dpwise.infra.scratch import alive

_PR_SET_PDEATHSIG = 1  # <sys/prctl.h>
# The signal the kernel sends the server when the command dies: not SIGTERM or SIGINT, which
# the server holds (interrupts.children_held) so that its children start with them held.
_ORPHANED = signal.SIGHUP
_REAP_S = 5.0  # how long the orphaned server waits for its killed children
_libc: list[Any] = []
_forker: list[int] = [0]  # the process about to fork (os.register_at_fork's "before")
_server: dict[str, int] = {}  # in the fork server: its pid, its parent's


def _death_signal(signum: int) -> None:
    """Ask the kernel for ``signum`` when this process's parent dies (Linux; a no-op elsewhere)."""
    if not _libc:
        try:
            import ctypes

            _libc.append(ctypes.CDLL(None, use_errno=True))
        except (ImportError, OSError):
            _libc.append(None)
    libc = _libc[0]
    if libc is not None and hasattr(libc, "prctl"):
        libc.prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def _in_fork_server() -> bool:
    """True while multiprocessing's fork server imports its preload (this module first)."""
    import sys

    server = sys.modules.get("multiprocessing.forkserver")
    code = getattr(getattr(server, "main", None), "__code__", None)
    frame: FrameType | None = sys._getframe()
    while frame is not None:
        if frame.f_code is code:
            return True
        frame = frame.f_back
    return False


def _tether_server() -> None:
    """In the fork server: end with the command; have every process forked from here (and from
    those) end with its parent."""
    _server.update(pid=os.getpid(), parent=os.getppid())
    signal.signal(_ORPHANED, _orphaned)
    _death_signal(_ORPHANED)
    os.register_at_fork(before=_before_fork, after_in_child=_tether_child)
    if not alive(_server["parent"]) or _server["parent"] == 1:  # died before the tether held
        _orphaned(int(_ORPHANED), None)


def _before_fork() -> None:
    _forker[0] = os.getpid()


def _tether_child() -> None:
    """Right after a fork, in the child: SIGKILL when the parent dies; the server's handler is
    not this process's."""
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(_ORPHANED) is _orphaned:
            signal.signal(_ORPHANED, signal.SIG_DFL)
    _death_signal(signal.SIGKILL)
    if os.getppid() != _forker[0]:  # the parent died between the fork and the line above
        os._exit(1)


def _orphaned(signum: int, frame: Any) -> None:
    """The server's handler: when the command has died, end its processes, remove its temporary
    folders, and exit. The same signal from anyone else, while the command lives, is ignored."""
    if os.getpid() != _server.get("pid"):  # a child not yet past _tether_child
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        return
    if os.getppid() == _server["parent"] and alive(_server["parent"]):
        return
    _end_children()
    scratch.remove_of(scratch.command_pid())
    _remove_listener_folder()
    os._exit(0)


def _end_children() -> None:
    """SIGKILL every child of this process, and reap them (bounded: a child in the kernel's
    uninterruptible sleep is left to the kernel)."""
    import time

    children = _children(os.getpid())
    for pid in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + _REAP_S
    while children and time.monotonic() < deadline:
        for pid in list(children):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                children.remove(pid)
        time.sleep(0.01)


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (from /proc; none where there is no /proc)."""
    found: list[int] = []
    try:
        entries = [e for e in os.listdir("/proc") if e.isdigit()]
    except OSError:
        return found
    for entry in entries:
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 1 and int(fields[1]) == parent:
            found.append(int(entry))
    return found


def _remove_listener_folder() -> None:
    """multiprocessing's folder for the server's socket (``pymp-*``): its owner, the command,
    removes it at exit, which a kill -9 skips."""
    import shutil
    from multiprocessing import forkserver

    address = getattr(getattr(forkserver, "_forkserver", None), "_forkserver_address", None)
    if isinstance(address, str):
        folder = os.path.dirname(address)
        if os.path.basename(folder).startswith("pymp-"):
            shutil.rmtree(folder, ignore_errors=True)


def _tie_to_parent(_anchor: object) -> None:
    """In a process the server forked, once multiprocessing has read what to run (after it, no
    more is written on the pipe): SIGKILL from the kernel when the process that started this one
    dies (see the module's docstring). Linux; a no-op elsewhere."""
    import fcntl
    import multiprocessing.process
    import select

    parent = multiprocessing.process.parent_process()
    fd = getattr(parent, "sentinel", None)
    set_signal = getattr(fcntl, "F_SETSIG", None)
    if fd is None or set_signal is None:
        return
    try:
        fcntl.fcntl(fd, fcntl.F_SETOWN, os.getpid())
        fcntl.fcntl(fd, set_signal, int(signal.SIGKILL))
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_ASYNC)
        watch = select.poll()
        watch.register(fd, select.POLLHUP)
        gone = watch.poll(0)  # it died before the tie held
    except OSError:
        return
    if gone:
        os.kill(os.getpid(), signal.SIGKILL)


if _in_fork_server():
    import multiprocessing.util

    _tether_server()
    # inherited by every process the server forks; run there by multiprocessing's bootstrap,
    # after it has read the process's target (the function is its own anchor: never collected)
    multiprocessing.util.register_after_fork(_tie_to_parent, _tie_to_parent)
