"""Signals that end a command, as exceptions: one line and exit code 128 + the signal's number.

Ctrl-C (SIGINT) already raises KeyboardInterrupt; SIGTERM (what a scheduler or `kill` sends)
is made to raise ``Interrupted`` too, so ``finally`` blocks, temporary files and worker
processes are cleaned up the same way for both, in the parent and in every worker.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

# What torch's elastic agent turns into its own exception while it runs workers.
AGENT_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
_HELD = {signal.SIGINT, signal.SIGTERM}


class Interrupted(KeyboardInterrupt):
    """The command was stopped by a signal; ``exit_code`` is what a shell reports for it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)


def exit_code(exc: KeyboardInterrupt) -> int:
    """128 + the signal's number: 130 for Ctrl-C (a plain KeyboardInterrupt), 143 for SIGTERM."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


def describe(exc: KeyboardInterrupt) -> str:
    signum = getattr(exc, "signum", signal.SIGINT)
    return (
        "interrupted"
        if signum == signal.SIGINT
        else f"interrupted by {signal.Signals(signum).name}"
    )


_received: list[int] = []  # signals raised as exceptions within ``terminate_raises``


def _raise(signum: int, frame: FrameType | None) -> None:
    _received.append(signum)
    raise Interrupted(signum)


@contextmanager
def terminate_raises() -> Iterator[None]:
    """Within the block SIGTERM raises Interrupted in the main thread, as Ctrl-C does, and both
    are remembered for ``check``."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, _raise) for s in _HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _received.clear()


def check() -> None:
    """Raise again a signal whose exception got lost: C code that clears any pending error (an
    import calling ``hasattr`` from C, say) can swallow the KeyboardInterrupt of a Ctrl-C that
    lands while it runs. Called where a command is about to start more processes or wait."""
    if _received:
        raise Interrupted(_received[0])


@contextmanager
def handlers_kept() -> Iterator[None]:
    """Put back the signal handlers that a block (torch's elastic agent) replaces."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signums = [getattr(signal, name) for name in AGENT_SIGNALS if hasattr(signal, name)]
    saved = {s: signal.getsignal(s) for s in signums}
    try:
        yield
    finally:
        for signum, handler in saved.items():
            if handler is not None:
                signal.signal(signum, handler)


@contextmanager
def deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive within the block act right after it (renames that belong
    together). Python runs signal handlers in the main thread whichever thread received the
    signal, so the handlers are swapped, not the mask; elsewhere no handler can interrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _: caught.append(signum)) for s in _HELD}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])  # now, to the real handler (or the default action)


@contextmanager
def held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back in this thread, and in every process it starts meanwhile.

    A signal mask survives fork and exec: a worker started here begins with both held, so a
    Ctrl-C that lands while it imports torch waits for it to be ready (``release``) instead of
    printing a traceback from the middle of an import. Process-wide signals still reach the
    command through its other threads (dpwise's launcher keeps one for that: the peer
    watch); Python runs the handlers in the main thread as ever.
    """
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is None:
        yield
        return
    previous = mask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        mask(signal.SIG_SETMASK, previous)


@contextmanager
def children_held() -> Iterator[None]:
    """``held`` for a block that starts processes (workers, a fork server).

    multiprocessing's resource tracker, when it first starts, unblocks SIGINT and SIGTERM in
    the calling thread (it blocks them while it spawns itself, then unblocks rather than
    restores): start it before, so nothing lifts the hold inside the block.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()
    with held():
        yield


def release() -> None:
    """In a process started under ``held``: SIGINT and SIGTERM act from now on, a pending one
    at once."""
    mask = getattr(signal, "pthread_sigmask", None)
    if mask is not None:
        mask(signal.SIG_UNBLOCK, _HELD)
