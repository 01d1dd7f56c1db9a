"""A user's file: read whole (a size limit, never a device or FIFO), and written back only while
it is still what was read, keeping its owner and mode.

A rewriter (`lint --fix`, `migrate -o` over an existing file) reads a file, works for a while,
then replaces it. Meanwhile the user may save it in an editor or append to it: the replacement
must not lose that. ``read`` returns the bytes and a ``Stamp`` (the file's identity, size,
times and digest); ``replace`` checks the stamp against the file just before and just after the
rename:

- before: the path still names the same inode, with the same size, modification time and
  content; else ``Changed``, and nothing is written;
- after: the old inode, held open across the rename, is unchanged; a write that landed in the
  microseconds between the check and the rename is put back (the old inode's content, as it is
  now, replaces the fix) and reported as ``Changed``.

The temporary file takes the original's owner, group and mode before the rename; where the
owner cannot be kept (a file of another user, writable through its group) nothing is written.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import atomic_file

MAX_BYTES = 1 << 20  # 1 MiB: a larger script is generated code, not something to rewrite


class TooLarge(DpwiseError):
    """Over the limit: refused before it is read."""

    def __init__(self, path: Path | str, size: int, limit: int) -> None:
        super().__init__(
            f"{path}: {size / 2**10:,.0f} KiB, over the {limit // 2**10:,} KiB limit for a script "
            "(larger files are generated code); give the source it is generated from"
        )
        self.size = size


class Changed(DpwiseError):
    """The file changed after it was read: it is left as it is now."""


@dataclass(frozen=True)
class Stamp:
    """Which file was read, and what it held."""

    dev: int
    ino: int
    size: int
    mtime_ns: int
    mode: int
    uid: int
    gid: int
    nlink: int
    digest: bytes

    @classmethod
    def of(cls, info: os.stat_result, data: bytes) -> Stamp:
        return cls(
            info.st_dev,
            info.st_ino,
            info.st_size,
            info.st_mtime_ns,
            stat.S_IMODE(info.st_mode),
            info.st_uid,
            info.st_gid,
            info.st_nlink,
            _digest(data),
        )


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def read(path: Path | str, limit: int = MAX_BYTES) -> tuple[bytes, Stamp]:
    """The file's bytes and stamp. A FIFO, socket or device is refused without blocking (it is
    opened non-blocking and checked before any read); a file over ``limit`` is refused before it
    is read (TooLarge). OSError for what cannot be opened."""
    # O_NONBLOCK: opening a FIFO with no writer would otherwise block forever
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise DpwiseError(f"{path}: not a regular file (a FIFO, socket or device)")
        if info.st_size > limit:
            raise TooLarge(path, info.st_size, limit)
        data = handle.read(limit + 1)
    if len(data) > limit:  # grew since fstat
        raise TooLarge(path, len(data), limit)
    return data, Stamp.of(info, data)


def replace(path: Path | str, data: bytes, stamp: Stamp) -> None:
    """Replace the file ``stamp`` describes with ``data`` (through a symbolic link: the file it
    points to), atomically, keeping owner, group and mode. Raises Changed when the file is not
    what was read (nothing written, or the other write put back), DpwiseError when its owner
    cannot be kept or it has other hard links, OSError for what the system refuses."""
    real = Path(os.path.realpath(path))
    if stamp.nlink > 1:
        raise DpwiseError(
            f"{path}: has {stamp.nlink} hard links; replacing it would split them, so it is "
            "left as it is (fix a copy, or apply the diff with --diff)"
        )
    fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    with open(fd, "rb") as held:  # the inode that was read, across the rename
        _same(path, real, held, stamp)
        check = lambda: _same(path, real, held, stamp)  # noqa: E731
        with atomic_file(real, mode=stamp.mode, before_replace=check) as fh:
            fh.write(data)
            fh.flush()
            _keep_owner(path, fh.fileno(), stamp)
        _after(path, real, held, stamp)


def _same(path: Path | str, real: Path, held: BinaryIO, stamp: Stamp) -> None:
    """Raise Changed unless the path still names the inode read, holding what was read."""
    now = os.fstat(held.fileno())
    try:
        named = os.stat(real)
    except FileNotFoundError:
        raise Changed(f"{path}: removed or renamed since it was read; nothing written") from None
    moved = (named.st_dev, named.st_ino) != (stamp.dev, stamp.ino)
    if moved or (now.st_size, now.st_mtime_ns) != (stamp.size, stamp.mtime_ns):
        raise Changed(_changed(path))
    held.seek(0)
    if _digest(held.read(stamp.size + 1)) != stamp.digest:
        raise Changed(_changed(path))


def _after(path: Path | str, real: Path, held: BinaryIO, stamp: Stamp) -> None:
    """A write into the old inode between the last check and the rename: put it back."""
    now = os.fstat(held.fileno())
    if (now.st_size, now.st_mtime_ns) == (stamp.size, stamp.mtime_ns):
        return
    held.seek(0)
    theirs = held.read()
    with atomic_file(real, mode=stamp.mode) as fh:
        fh.write(theirs)
        fh.flush()
        _keep_owner(path, fh.fileno(), stamp)
    raise Changed(_changed(path))


def _changed(path: Path | str) -> str:
    return (
        f"{path}: changed while dpwise worked on it (an editor or another program wrote to it); "
        "left as it is now: run the command again"
    )


def _keep_owner(path: Path | str, fd: int, stamp: Stamp) -> None:
    own = os.fstat(fd)
    if (own.st_uid, own.st_gid) == (stamp.uid, stamp.gid):
        return
    try:
        os.fchown(fd, stamp.uid, stamp.gid)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EACCES):
            raise
        raise DpwiseError(
            f"{path}: belongs to uid {stamp.uid} / gid {stamp.gid}, which this user cannot give "
            "a new file; left as it is (run as its owner)"
        ) from None
