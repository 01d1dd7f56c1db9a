"""A new file: written whole or not at all under a name that does not exist yet, and never over
anything that does, a dangling symbolic link included.

``probe`` asks the folder before any work starts (a read-only mount, a folder this user may not
write in); ``create`` stages the bytes in a temporary file beside the name and hard-links it
into place: link(2) fails on any existing name and follows no symbolic link, so a file or link
made meanwhile is never replaced or followed. Where the file system has no hard links, an
exclusive create (O_EXCL | O_NOFOLLOW, the same refusals) writes it, removed if the write fails.
``remove`` takes back a file ``create`` made, and only that file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from pathlib import Path

from dpwise.infra.interrupts import deferred

# link(2) on a file system without hard links (FAT, some network and FUSE file systems)
_NO_LINKS = {errno.EPERM, errno.EOPNOTSUPP, errno.ENOSYS}
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_EXCLUSIVE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW


def _temporary(path: Path) -> tuple[int, str]:
    # the writer's pid in the name, as atomic_file's: see atomic.remove_stale_temporaries
    return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}-", suffix=".tmp")


def probe(path: Path) -> None:
    """Raise OSError unless a file can be made beside ``path`` now (a temporary file is made and
    removed: the only sure test of a read-only mount, permissions and free inodes)."""
    fd, tmp = _temporary(path)
    os.close(fd)
    os.unlink(tmp)


def create(path: Path, data: bytes, mode: int = 0o644) -> os.stat_result:
    """Write ``data`` to ``path``, a name that must not exist. FileExistsError when something
    holds the name (left as it is), OSError for what the system refuses (a full disk included);
    nothing is left behind on any failure. Returns the new file's identity."""
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
            made = os.fstat(fh.fileno())
        with deferred():
            try:
                os.link(tmp, path)
            except OSError as exc:
                if exc.errno not in _NO_LINKS:
                    raise
                made = _exclusive(path, data, mode)
        return made
    finally:
        Path(tmp).unlink(missing_ok=True)


def _exclusive(path: Path, data: bytes, mode: int) -> os.stat_result:
    fd = os.open(path, _EXCLUSIVE, mode)
    made = os.fstat(fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            os.fchmod(fh.fileno(), mode)
    except BaseException:
        remove(path, made)
        raise
    return made


def remove(path: Path, made: os.stat_result) -> None:
    """Remove the file ``create`` made at ``path``, unless the name now holds another."""
    with contextlib.suppress(FileNotFoundError):
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) == (made.st_dev, made.st_ino):
            path.unlink()
