"""The workers of one launch, seen from the launcher: which pid is which rank, which one stopped.

A worker whose process is stopped (SIGSTOP, Ctrl-Z, a debugger, a frozen container) holds every
other rank in its next collective until the collective's timeout, and then the healthy ranks fail
and are blamed. So each launched worker writes ``worker.<rank>.pid`` into the launch's folder,
and the launcher (the elastic agent's process) reads ``/proc/<pid>/stat`` a few times a second. A
worker stopped for --timeout seconds is killed (SIGKILL: the one signal a stopped process
cannot hold back) and named; the agent then stops the others as for any dead worker.
Without /proc (not Linux) nothing is watched and the collectives' own timeout ends the run.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from dpwise.infra.atomic import atomic_write_text
from dpwise.infra.scratch import LAUNCH_DIR_ENV  # the launch folder, set in its workers
from dpwise.launch import forking

POLL_S = 0.25
_STOPPED_STATES = ("T", "t")  # stopped by a signal; stopped by a tracer
_GAP = 8  # polls: a longer pause means this process was not running (stopped itself)


def register() -> None:
    """In a launched worker: say which pid this rank has (a no-op outside dpwise's launcher)."""
    folder, rank = os.environ.get(LAUNCH_DIR_ENV), os.environ.get("RANK")
    if folder and rank is not None and Path(folder).is_dir():
        atomic_write_text(Path(folder) / f"worker.{rank}.pid", str(os.getpid()))


def registered(folder: Path) -> dict[int, int]:
    """{global rank: pid} of the workers this launch started on this machine."""
    found = {}
    for path in folder.glob("worker.*.pid"):
        with contextlib.suppress(OSError, ValueError):
            found[int(path.name.split(".")[1])] = int(path.read_text())
    return found


def child_state(pid: int) -> str | None:
    """The process state letter of ``pid`` if it is alive and this process's child (or its fork
    server's: a worker forked for it), else None."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rpartition(")")[2].split()  # the name may hold spaces
    except OSError:
        return None
    if len(fields) < 2 or fields[0] in ("Z", "X"):
        return None
    if int(fields[1]) not in (os.getpid(), forking.server_pid()):
        return None
    return fields[0]


@dataclass(frozen=True)
class Stopped:
    rank: int
    pid: int
    seconds: float


class PeerWatch:
    """A thread that kills a worker stopped for ``limit_s`` and remembers which one it was;
    ``running(now)`` is called at every look while this launch's workers are registered."""

    def __init__(
        self,
        folder: Path,
        limit_s: float,
        poll_s: float = POLL_S,
        running: Callable[[float], None] | None = None,
    ) -> None:
        self.folder, self.limit_s, self.poll_s, self.running = folder, limit_s, poll_s, running
        self.stopped: Stopped | None = None  # the worker this watch killed
        self._since: dict[int, tuple[int, float]] = {}  # pid → (rank, first seen stopped)
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dpwise-peer-watch", daemon=True)

    def __enter__(self) -> PeerWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()
        self.kill_all()  # whatever the agent left behind: no orphan, stopped or not

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            self.check(time.monotonic())

    def check(self, now: float) -> None:
        with self._lock:
            if now - self._last > _GAP * self.poll_s:
                self._since.clear()  # this process itself was stopped: nobody watched meanwhile
            self._last = now
            workers = registered(self.folder)
            if workers and self.running is not None:
                self.running(now)
            for rank, pid in sorted(workers.items()):
                state = child_state(pid)
                if state is None:
                    continue  # gone: if it was stopped, it stays a suspect
                if state not in _STOPPED_STATES:
                    self._since.pop(pid, None)
                    continue
                since = self._since.setdefault(pid, (rank, now))[1]
                if now - since >= self.limit_s:
                    if self.stopped is None:
                        self.stopped = Stopped(rank, pid, now - since)
                    _kill(pid)

    def suspect(self) -> Stopped | None:
        """The worker to blame when the run failed: the one this watch killed, else the one that
        was stopped first and never ran again (the others' collectives may time out first)."""
        with self._lock:
            if self.stopped is not None or not self._since:
                return self.stopped
            pid, (rank, since) = min(self._since.items(), key=lambda item: item[1][1])
            return Stopped(rank, pid, self._last - since)

    def kill_all(self) -> None:
        for pid in registered(self.folder).values():
            if child_state(pid) is not None:
                _kill(pid)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
