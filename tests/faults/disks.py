"""Real small file systems for the fault tests: a tmpfs of a given size (root mounts it; a test
is skipped where it cannot), and a file that fills one to the last byte."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(folder: Path, size: str) -> Iterator[Path]:
    """A real tmpfs of ``size`` (tmpfs's units: 64k, 1m) mounted on ``folder`` for the block."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                       check=True, capture_output=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        pytest.skip(f"cannot mount a small tmpfs here (needs root and mount rights): {exc}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False, timeout=30)


def fill(folder: Path) -> Path:
    """Write into ``folder`` until its file system is full; the file that did it."""
    ballast = folder / "ballast"
    with open(ballast, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
    return ballast
