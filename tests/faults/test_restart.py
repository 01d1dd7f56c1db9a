"""--max-restarts: kill -9 a worker mid-run; the restarted group resumes and ends where an
uninterrupted run ends (the parameters within 1e-6, metrics.json holding the whole run)."""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import child_env, load_state, max_abs_diff, run_cli

RUN = ["train", "--strategy", "ddp", "--nproc", "2", "--epochs", "2", "--checkpoint-every", "5"]
RESUMED = re.compile(r"^restart 1: resuming from step (\d+) of checkpoint\.pt$", re.M)


def _workers(launcher: int) -> list[int]:
    """The launcher's worker processes (its children, but multiprocessing's resource tracker)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == launcher and b"resource_tracker" not in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def _killed_run(out: Path, delay: float) -> tuple[subprocess.CompletedProcess, int]:
    """Start a run; `delay` s after its first checkpoint, kill -9 a random worker."""
    args = [sys.executable, "-m", "dpwise", *RUN, "--max-restarts", "1", "--out", str(out)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env()
    )
    deadline = time.monotonic() + 120
    while (
        not (out / "checkpoint.pt").exists() and proc.poll() is None and time.monotonic() < deadline
    ):
        time.sleep(0.02)
    time.sleep(delay)
    victims = _workers(proc.pid)
    victim = random.choice(victims) if victims else 0
    if victim:
        os.kill(victim, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=240)
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr), victim


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="finds workers through /proc")
def test_a_killed_worker_is_restarted_and_the_run_resumes_to_the_same_parameters(tmp_path):
    straight = run_cli(*RUN, "--quiet", "--out", str(tmp_path / "straight"))
    assert straight.returncode == 0, straight.stderr
    expected = load_state(tmp_path / "straight" / "final.pt")
    losses = json.loads((tmp_path / "straight" / "metrics.json").read_text())["losses"]
    for trial in range(2):
        out = tmp_path / f"killed{trial}"
        proc, victim = _killed_run(out, delay=random.uniform(0.0, 1.5))
        assert victim, "no worker to kill: the run ended before its first checkpoint"
        assert proc.returncode == 0, proc.stderr[-3000:]
        resumed = RESUMED.findall(proc.stderr)
        assert len(resumed) == 1 and int(resumed[0]) >= 5, proc.stderr[-3000:]
        assert max_abs_diff(expected, load_state(out / "final.pt")) <= 1e-6
        metrics = json.loads((out / "metrics.json").read_text())
        assert metrics["restarts"] == 1 and metrics["resumed_at_step"] == int(resumed[0])
        assert metrics["losses"] == pytest.approx(losses, abs=1e-6)
        assert [e["steps"] for e in metrics["epochs"]] == [39, 39]
        assert not list(out.glob(".*.tmp"))  # a write the kill interrupted left nothing
