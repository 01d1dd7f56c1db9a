"""Write a file so that readers see the old content or the new, never half of it."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dpwise.errors import DpwiseError
from dpwise.infra.interrupts import deferred
from dpwise.infra.scratch import alive

# A full file system, an exhausted quota, a file-size limit (ulimit -f): said in one line.
_FREE = "free space there or write elsewhere (--out)"
_NO_ROOM = {
    errno.ENOSPC: ("no space left on device", _FREE),
    errno.EFBIG: ("file too large for this process's file-size limit", "raise it (ulimit -f)"),
}
if hasattr(errno, "EDQUOT"):
    _NO_ROOM[errno.EDQUOT] = ("disk quota exceeded", _FREE)

_PID_END = "-"
_SUFFIX = ".tmp"


@contextmanager
def atomic_file(
    path: Path,
    fsync: bool = False,
    mode: int = 0o644,
    before_replace: Callable[[], None] | None = None,
) -> Iterator[BinaryIO]:
    """Yield a temporary file beside ``path``; it replaces ``path`` only if the block succeeds
    (and ``before_replace``, called last before the rename, raises nothing)."""
    with atomic_files(path, fsync=fsync, mode=mode, before_replace=before_replace) as (fh,):
        yield fh


@contextmanager
def atomic_files(
    *paths: Path,
    fsync: bool = False,
    mode: int = 0o644,
    before_replace: Callable[[], None] | None = None,
) -> Iterator[list[BinaryIO]]:
    """Like atomic_file for files that belong together: all of them are replaced, or none.

    The renames run with SIGINT and SIGTERM deferred: an interrupt cannot fall between them.
    """
    staged: list[tuple[Path, str]] = []
    handles: list[BinaryIO] = []
    where = paths[0]  # the file a failure is reported for
    try:
        for where in paths:
            if where.exists() and not where.is_file():  # a device, a pipe, a folder
                raise IsADirectoryError(errno.EISDIR, "not a regular file", str(where))
            # the writer's pid in the name: see remove_stale_temporaries
            prefix = f".{where.name}.{os.getpid()}{_PID_END}"
            where.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=where.parent, prefix=prefix, suffix=_SUFFIX)
            staged.append((where, tmp))
            handles.append(os.fdopen(fd, "wb"))
        where = paths[0]
        yield handles
        for index, fh in enumerate(handles):
            where = staged[index][0]
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
            fh.close()
        with deferred():
            if before_replace is not None:
                before_replace()
            for path, tmp in staged:
                os.chmod(tmp, mode)
                os.replace(tmp, path)
    except BaseException as exc:
        for fh in handles:
            with contextlib.suppress(OSError):  # its unwritten buffer: the disk may be full
                fh.close()
        for _, tmp in staged:
            Path(tmp).unlink(missing_ok=True)
        full = no_room(exc, where)
        if full is not None:
            raise full from None
        raise


def no_room(exc: BaseException, path: Path) -> DpwiseError | None:
    """One line for a write that failed for want of room, found anywhere in the exception's chain
    (torch.save reports it as `RuntimeError: [enforce fail ...] unexpected pos`, caused by the
    file object's OSError)."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, OSError) and cause.errno in _NO_ROOM:
            what, fix = _NO_ROOM[cause.errno]
            return DpwiseError(f"{what} while writing {path} (nothing was replaced); {fix}")
        cause = cause.__cause__ or cause.__context__
    return None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def remove_stale_temporaries(folder: Path) -> list[Path]:
    """Delete the temporary files of writes whose process died (a kill -9 mid-write).

    The name says who writes it (``.NAME.PID-XXXX.tmp``): a file of a live process, another
    run writing into the same folder, is left alone.
    """
    removed = []
    for tmp in folder.glob(f".*.*{_PID_END}*{_SUFFIX}") if folder.is_dir() else []:
        pid = tmp.name[1:].rsplit(_PID_END, 1)[0].rsplit(".", 1)[-1]
        if pid.isdigit() and not alive(int(pid)):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed
