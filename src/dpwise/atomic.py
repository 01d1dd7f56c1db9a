"""Write a file so that readers see the old content or the new, never half of it."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from dpwise.interrupts import deferred


@contextmanager
def atomic_file(path: Path, fsync: bool = False) -> Iterator[BinaryIO]:
    """Yield a temporary file beside ``path``; it replaces ``path`` only if the block succeeds."""
    with atomic_files(path, fsync=fsync) as (fh,):
        yield fh


@contextmanager
def atomic_files(*paths: Path, fsync: bool = False) -> Iterator[list[BinaryIO]]:
    """Like atomic_file for files that belong together: all of them are replaced, or none.

    The renames run with SIGINT and SIGTERM held back: an interrupt cannot fall between them.
    """
    staged: list[tuple[Path, str]] = []
    handles: list[BinaryIO] = []
    try:
        for path in paths:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
            staged.append((path, tmp))
            handles.append(os.fdopen(fd, "wb"))
        yield handles
        for fh in handles:
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
            fh.close()
        with deferred():
            for path, tmp in staged:
                os.chmod(tmp, 0o644)
                os.replace(tmp, path)
    except BaseException:
        for fh in handles:
            fh.close()
        for _, tmp in staged:
            Path(tmp).unlink(missing_ok=True)
        raise


def remove_leftovers(folder: Path, names: tuple[str, ...]) -> list[Path]:
    """Remove the temporary files a killed writer of ``names`` left in ``folder``."""
    removed = []
    for name in names:
        for tmp in folder.glob(f".{name}.*.tmp"):
            tmp.unlink(missing_ok=True)
            removed.append(tmp)
    return removed


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_file(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
