"""Turn-taking between compare's run processes over a TCPStore the parent hosts.

The parent grants one turn at a time (``<run>/<turn>/go``); every process of that run waits for
the key, computes, and the run's rank 0 answers ``<run>/<turn>/done`` (with a payload where one is
needed). A failing process writes ``<run>/error``. Every wait is bounded: the parent's by a
deadline and by watching the processes, the workers' by the store's timeout, and a worker whose
parent died finds the store gone and stops.

Each run process also beats (``Heartbeat``): a thread of its own raises ``<run>/beat`` every
second, whatever the process computes. A run process stopped (SIGSTOP, Ctrl-Z, a debugger) or
hung with the interpreter locked stops beating, and the parent ends the comparison after
--timeout seconds of silence, naming the run (``silence``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta

import torch.distributed as dist

from dpwise.errors import DpwiseError
from dpwise.launch.elastic import WorkerFailed

HOST = "127.0.0.1"
WAIT_FOR_TURN_S = 24 * 3600  # a run process waits at most this long for its next turn
POLL_S = 0.02  # how often the parent looks for an answer: ~0.5 % of a core, ≤ 20 ms late
WATCH_EVERY_S = 0.5  # how often it looks for a failed or dead run process
BEAT_S = 1.0  # how often a run process says it is alive


class RunFailed(WorkerFailed):
    """A run process failed; carries its own traceback (the CLI prints it, exit code 1)."""

    def __init__(self, label: str, details: str, reason: str = "") -> None:
        Exception.__init__(self, f"the {label} run failed" + (f": {reason}" if reason else ""))
        self.rank, self.exitcode, self.details = 0, 1, details


def _key(run_id: str, *parts: str) -> str:
    return "/".join((run_id, *parts))


class TurnHost:
    """The parent's side: grants turns and collects answers."""

    def __init__(self) -> None:
        self.store = dist.TCPStore(
            HOST, 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60)
        )
        self.address = (HOST, self.store.port)

    def failure(self, run_id: str) -> dict[str, str] | None:
        key = _key(run_id, "error")
        return json.loads(self.store.get(key)) if self.store.check([key]) else None

    def beats(self, run_id: str) -> int:
        """How many times the run's process has said it is alive."""
        return int(self.store.add(_key(run_id, "beat"), 0))

    def wait(self, run_id: str, what: str, watch: Callable[[], None], timeout_s: float) -> str:
        """Wait for ``<run>/<what>``; ``watch`` raises when a process failed."""
        key = _key(run_id, what)
        deadline = next_watch = time.monotonic()
        deadline += timeout_s
        while not self.store.check([key]):
            now = time.monotonic()
            if now >= next_watch:
                watch()
                next_watch = now + WATCH_EVERY_S
            if now > deadline:
                raise TimeoutError(f"run {run_id} gave no '{what}' within {timeout_s:.0f} s")
            time.sleep(POLL_S)
        return self.store.get(key).decode()

    def play(self, run_id: str, turn: str, watch: Callable[[], None], timeout_s: float) -> str:
        """Grant one turn and wait for its answer."""
        self.store.set(_key(run_id, turn, "go"), "1")
        return self.wait(run_id, f"{turn}/done", watch, timeout_s)


class TurnClient:
    """A run process's side: waits for its turns and answers them (rank 0 only)."""

    def __init__(self, address: tuple[str, int], run_id: str, is_main: bool = True) -> None:
        self.run_id, self.is_main = run_id, is_main
        self.store = dist.TCPStore(
            address[0],
            address[1],
            is_master=False,
            timeout=timedelta(seconds=WAIT_FOR_TURN_S),
        )

    def ready(self) -> None:
        if self.is_main:
            self.store.set(_key(self.run_id, "ready"), "1")

    def wait(self, turn: str) -> None:
        self.store.wait([_key(self.run_id, turn, "go")])

    def done(self, turn: str, payload: str = "") -> None:
        if self.is_main:
            self.store.set(_key(self.run_id, turn, "done"), payload)

    def fail(self, exc: BaseException) -> None:
        """Record the first failure of this run for the parent (later ones add nothing)."""
        usage = isinstance(exc, DpwiseError)
        worker = isinstance(exc, WorkerFailed)  # a launched worker's own error, or a hung one
        details = exc.details if isinstance(exc, WorkerFailed) else traceback.format_exc()
        self._record(
            {
                "usage": usage,
                "worker": worker,
                "message": str(exc),
                "details": "" if usage else details,
            }
        )

    def signalled(self, signum: int) -> None:
        """This process was ended by a signal to it alone (SIGTERM, SIGINT, which torch's
        launcher turns into an exception): the parent says so in one line, with no traceback."""
        self._record(
            {"usage": False, "worker": True, "message": ended(os.getpid(), -signum), "details": ""}
        )

    def _record(self, failure: dict[str, object]) -> None:
        with contextlib.suppress(Exception):  # the parent is gone: nobody is left to tell
            self.store.compare_set(_key(self.run_id, "error"), "", json.dumps(failure))


class Heartbeat:
    """A run process's sign of life: a daemon thread that raises ``<run>/beat`` every BEAT_S
    seconds over a store connection of its own. It stops with the process; a process whose
    threads are all stopped, or whose interpreter stays locked, falls silent."""

    def __init__(self, address: tuple[str, int], run_id: str) -> None:
        self.address, self.key = address, _key(run_id, "beat")
        self.thread = threading.Thread(target=self._beat, name="dpwise-heartbeat", daemon=True)

    def start(self) -> Heartbeat:
        self.thread.start()
        return self

    def _beat(self) -> None:
        try:
            store = dist.TCPStore(
                self.address[0], self.address[1], is_master=False, timeout=timedelta(seconds=60)
            )
            while True:
                store.add(self.key, 1)
                time.sleep(BEAT_S)
        except Exception:  # the parent is gone: nobody listens
            return


def ended(pid: int | None, code: int | None) -> str:
    """How a run's process ended without a word: its exit code, or the signal that killed it."""
    if code is not None and code < 0:
        with contextlib.suppress(ValueError):
            return f"its process (pid {pid}) was killed by {signal.Signals(-code).name}"
    return f"its process (pid {pid}) exited with code {code} without saying why"


def silence(label: str, pid: int | None, seconds: float, timeout: float, least: float) -> RunFailed:
    """The failure of a run whose process fell silent for --timeout seconds (``least`` at the
    least: a run process beats once a second)."""
    how = "was stopped (SIGSTOP, Ctrl-Z, a debugger)" if _stopped(pid) else "gave no sign of life"
    floor = f", at least {least:g} s for a run process" if timeout < least else ""
    return RunFailed(
        label,
        "",
        f"its process (pid {pid}) {how} for {seconds:.0f} s (--timeout {timeout:g}{floor}); dpwise "
        "ended the comparison: find what stops it, or raise --timeout if such pauses are expected",
    )


def _stopped(pid: int | None) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] in (b"T", b"t")
    except (OSError, IndexError):
        return False


def raise_failure(label: str, failure: dict[str, str]) -> None:
    if failure["usage"]:
        raise DpwiseError(failure["message"])
    if failure.get("worker"):
        raise RunFailed(label, failure["details"], failure["message"])
    raise RunFailed(label, failure["details"] or failure["message"])
