"""One writer per --out folder: an advisory lock held by the command for the run's whole life.

The lock is `fcntl.flock` on OUT/.dpwise.lock, taken without waiting: a second run into the same
folder is refused at once, naming the first run's process id. The kernel drops the lock when its
holder exits, however it exits (a crash, kill -9), so a stale lock file never blocks a later run.
Where there is no `fcntl` (Windows) the folder is not locked.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dpwise.errors import DpwiseError
from dpwise.infra import scratch

LOCK_NAME = scratch.LOCK_NAME
_TRIES = 20  # a run that is just releasing the lock unlinks the file: open the new one again


@contextmanager
def locked(out: Path) -> Iterator[None]:
    """Hold the lock on ``out`` (created if missing) for the block; a folder this call created
    is removed again at the end when the block left nothing in it."""
    created = first_missing(out)
    out.mkdir(parents=True, exist_ok=True)
    fd = _acquire(out)
    if fd is not None:  # gone with the command, even a killed one (dpwise.infra.scratch)
        scratch.own(scratch.LOCK, out / LOCK_NAME)
        if created is not None:
            scratch.own(scratch.EMPTY, out, created)
    try:
        yield
    finally:
        _release(out, fd)
        if created is not None:
            _remove_empty(out, created)


def first_missing(out: Path) -> Path | None:
    """The outermost folder of ``out`` that does not exist yet (what a run would create)."""
    missing = None
    for folder in (out, *out.parents):
        if folder.exists():
            break
        missing = folder
    return missing


def _acquire(out: Path) -> int | None:
    try:
        import fcntl
    except ImportError:  # no advisory locks here
        return None
    path = out / LOCK_NAME
    for _ in range(_TRIES):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _holder(fd)
            os.close(fd)
            raise DpwiseError(
                f"--out {out} is in use by another dpwise run ({holder}); wait for it to "
                "finish or choose another --out"
            ) from None
        if _same_file(path, fd):
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return fd
        os.close(fd)  # we locked a file its holder had just unlinked: try the new one
    raise DpwiseError(f"--out {out}: could not take the lock {path}; try again")


def _same_file(path: Path, fd: int) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        text = ""
    return f"pid {text}" if text.isdigit() else "pid not yet known"


def _release(out: Path, fd: int | None) -> None:
    if fd is None:
        return
    try:
        (out / LOCK_NAME).unlink(missing_ok=True)  # unlink while still holding it, then unlock
    finally:
        os.close(fd)


def _remove_empty(out: Path, created: Path) -> None:
    """rmdir ``out`` and its parents up to ``created`` while they are empty."""
    for folder in (out, *out.parents):
        try:
            folder.rmdir()
        except OSError:
            return
        if folder == created:
            return
