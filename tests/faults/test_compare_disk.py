"""A compare whose disk fills after its runs were measured keeps what was measured: the runs'
files and results.json stay in --out (a folder it created included); one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import disks
import pytest

from conftest import child_env

COMPARE = ["compare", "--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data",
           "--batch-size", "8", "--epochs", "2", "--threads", "1", "--strategies", "single,dp",
           "--quiet"]  # fmt: skip


@pytest.fixture
def small_fs(tmp_path: Path):
    """A real 4 MiB tmpfs: room for the runs and their traces, filled by the test."""
    with disks.tmpfs(tmp_path / "small", "4m") as mnt:
        yield mnt


def test_a_disk_filled_while_the_report_is_written_keeps_the_runs(small_fs: Path) -> None:
    out = small_fs / "o"  # a folder compare creates: removed on a failure before any run ended
    proc = subprocess.Popen([sys.executable, "-m", "dpwise", *COMPARE, "--out", str(out)],
                            env=child_env(), text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (out / "runs").is_dir():  # the runs are measured and swapped in
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "compare never swapped its runs in"
            time.sleep(0.002)
        disks.fill(small_fs)  # the plots and the report are still to come
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "no space left on device" in lines[0] and "what was measured is kept in" in lines[0]
    assert sorted(p.name for p in (out / "runs").iterdir()) == ["dp", "single"]
    assert all((out / "runs" / run / "final.pt").is_file() for run in ("dp", "single"))
    if "(runs/, traces/, results.json)" in lines[0]:  # written before the disk filled
        doc = json.loads((out / "results.json").read_text())
        assert {r["id"] for r in doc["runs"]} == {"single", "dp"}
    assert not (out / "report.html").exists()
