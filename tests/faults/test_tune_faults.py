"""`dpwise tune` under real faults: a disk that fills mid-search keeps what was measured and
--resume continues once there is room; a default that diverges keeps what was measured. (A
search folder copied to another machine and resumed with --out spelled another way, and a worker
killed with kill -9 leaving no temporary folder: tests/test_tune.py, with Ctrl-C and the killed
candidate.)"""

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

from conftest import FIXTURES, child_env

TINY = ["--nproc", "2", "--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data",
        "--batch-size", "8", "--knobs", "gradient_as_bucket_view",
        "--budget", "30", "--quiet"]  # fmt: skip
# one knob: a round is two trainings, and no second stage (what a fault keeps and a resume
# finishes is the same for one candidate as for several)
ENDS = ("finished", "budget")  # a resumed search that ran to its end
# a resume may raise the budget: on a busy machine the first session can use most of 30 s, and
# the resumed one must still measure a round (its workers' start counts too); a search still
# undecided at 90 s in all ends on the budget, as ENDS allows
RESUMED = ["--budget", "90"]


def _journal(out: Path) -> dict:
    try:
        return json.loads((out / ".search" / "journal.json").read_text())
    except (OSError, ValueError):
        return {}


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text())


def _start(out: str, cwd: Path, tmp: Path, *more: str, env: dict | None = None
           ) -> subprocess.Popen:  # fmt: skip
    tmp.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "dpwise", "tune", *TINY, *more, "--out", out],
        cwd=cwd, env=child_env({"TMPDIR": str(tmp), **(env or {})}), text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip


def _wait_rounds(proc: subprocess.Popen, out: Path, rounds: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _journal(out).get("rounds", 0) < rounds:
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, f"no round {rounds} within {timeout} s"
        time.sleep(0.01)


def _one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- a full disk -----------------------------------------------------------------------------------
@pytest.fixture
def small_fs(tmp_path: Path):
    """A real 1 MiB tmpfs: room for a tiny search, filled by the test."""
    with disks.tmpfs(tmp_path / "small", "1m") as mnt:
        yield mnt


@pytest.mark.slow
def test_a_disk_filled_mid_search_keeps_what_was_measured_and_resume_finishes(
    small_fs, tmp_path, run_here
):
    out = small_fs / "o"
    proc = _start(str(out), tmp_path, tmp_path / "tmp")
    try:
        _wait_rounds(proc, out, 1)
        ballast = disks.fill(small_fs)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, err
    line = _one_line(err)
    assert line.startswith("dpwise: error: no space left on device while writing"), line
    kept = _journal(out)
    assert kept.get("rounds", 0) >= 1, line  # the last good journal stays, and the reference
    assert (out / ".search" / "default.pt").is_file()
    assert "is kept in" in line and "--resume` continues" in line, line
    ballast.unlink()
    # in this process: the fault was the first session's; the resume is about the files it kept
    got = run_here("tune", *TINY, *RESUMED, "--out", str(out), "--resume")
    assert got.returncode == 0, got.stderr
    doc = _results(out)
    assert doc["stopped"] in ENDS and doc["rounds"] > kept["rounds"]
    assert doc["timing"]["sessions"] == 2


SOURING = """
import os
from torch import nn


class Souring(nn.Linear):
    def forward(self, x):  # NaN from the moment the marker file exists
        y = super().forward(x)
        return y * float("nan") if os.path.exists(os.environ["SOUR_MARK"]) else y


def model():
    return nn.Sequential(Souring(4, 8), nn.ReLU(), nn.Linear(8, 2))
"""


@pytest.mark.slow
def test_a_default_that_diverges_after_a_round_keeps_what_was_measured(tmp_path):
    (tmp_path / "souring.py").write_text(SOURING)
    mark, out = tmp_path / "sour", tmp_path / "t"
    path = os.pathsep.join([str(tmp_path), str(FIXTURES), os.environ.get("PYTHONPATH", "")])
    env = {"SOUR_MARK": str(mark), "PYTHONPATH": path}
    proc = _start(str(out), tmp_path, tmp_path / "tmp", "--model", "souring:model", env=env)
    try:
        _wait_rounds(proc, out, 1)
        mark.touch()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 2, err
    line = _one_line(err)
    kept = _journal(out)
    assert kept.get("rounds", 0) >= 1 and kept["stopped"] == "failed", line
    assert (out / ".search" / "default.pt").is_file()
    assert "the default configuration's loss became nan" in line and "is kept in" in line, line
