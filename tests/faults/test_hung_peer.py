"""A hung peer: --timeout bounds the wait, a stopped worker is killed and named, nothing stays."""

from __future__ import annotations

import math
import os
import re
import signal
import subprocess
import time

import pytest
from live_run import LiveRun, alive, survivors

from conftest import run_cli
from dpwise.errors import DpwiseError
from dpwise.launch import peers
from dpwise.train.config import TrainConfig

SMALL = ["--data", "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model"]


@pytest.mark.parametrize("value", [0, 0.5, -3, math.inf, math.nan, 1e9])
def test_a_timeout_out_of_range_is_refused_in_one_line(value):
    with pytest.raises(DpwiseError, match=r"--timeout must be a number of seconds from 1 to"):
        TrainConfig(strategy="ddp", timeout=value)


def test_compare_passes_its_timeout_to_every_run_and_refuses_a_bad_one():
    from dpwise.compare.settings import CompareConfig

    assert CompareConfig(timeout=7).train_config("ddp", 2).timeout == 7
    with pytest.raises(DpwiseError, match="--timeout must be"):
        CompareConfig(timeout=0)


def test_the_cli_refuses_a_bad_timeout_with_exit_2_and_one_line():
    proc = run_cli("train", "--strategy", "ddp", "--timeout", "abc")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "dpwise: error: argument --timeout: invalid float value: 'abc' (see 'dpwise train --help')"
    ]


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen(["sleep", "60"])


def _signal(pid: int, signum: int, state: str) -> None:
    """Send ``signum`` and wait until the process shows ``state`` (delivery takes a moment)."""
    os.kill(pid, signum)
    deadline = time.monotonic() + 10
    while peers.child_state(pid) != state and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_watch_kills_a_worker_stopped_longer_than_the_limit_and_names_it(tmp_path):
    stopped, running = _sleeper(), _sleeper()
    try:
        (tmp_path / "worker.1.pid").write_text(str(stopped.pid))
        (tmp_path / "worker.0.pid").write_text(str(running.pid))
        os.kill(stopped.pid, signal.SIGSTOP)
        with peers.PeerWatch(tmp_path, limit_s=1.0, poll_s=0.05) as watch:
            assert stopped.wait(timeout=10) == -signal.SIGKILL
            assert alive(running.pid)  # a running worker is left alone
        assert watch.stopped is not None
        assert (watch.stopped.rank, watch.stopped.pid) == (1, stopped.pid)
        assert 1.0 <= watch.stopped.seconds < 3.0
        assert running.wait(timeout=10) == -signal.SIGKILL  # leaving the watch: no orphan
    finally:
        for proc in (stopped, running):
            proc.kill()
            proc.wait()


def test_stops_that_end_do_not_add_up_to_a_hang(tmp_path):
    worker = _sleeper()
    try:
        (tmp_path / "worker.0.pid").write_text(str(worker.pid))
        watch = peers.PeerWatch(tmp_path, limit_s=5.0, poll_s=1.0)
        start = time.monotonic()
        _signal(worker.pid, signal.SIGSTOP, "T")
        watch.check(start)
        watch.check(start + 1.0)
        _signal(worker.pid, signal.SIGCONT, "S")
        watch.check(start + 1.5)
        _signal(worker.pid, signal.SIGSTOP, "T")
        watch.check(start + 2.0)
        watch.check(start + 5.5)  # 5.5 s since the first stop, 3.5 s since the second
        assert watch.stopped is None and alive(worker.pid)
        watch.check(start + 7.5)
        assert watch.stopped is not None and watch.stopped.pid == worker.pid
    finally:
        worker.kill()
        worker.wait()


def test_a_stopped_worker_killed_by_the_launcher_first_is_still_the_one_named(tmp_path):
    """The others' collectives may time out just before the watch's limit; the launcher then
    stops every worker itself: the stopped one remains the suspect, not the rank that failed."""
    stopped, running = _sleeper(), _sleeper()
    try:
        (tmp_path / "worker.1.pid").write_text(str(stopped.pid))
        (tmp_path / "worker.0.pid").write_text(str(running.pid))
        watch = peers.PeerWatch(tmp_path, limit_s=60.0)
        assert watch.suspect() is None
        start = time.monotonic()
        _signal(stopped.pid, signal.SIGSTOP, "T")
        watch.check(start)
        stopped.kill()
        stopped.wait()  # reaped: gone from /proc
        watch.check(start + 2.0)
        suspect = watch.suspect()
        assert suspect is not None and (suspect.rank, suspect.pid) == (1, stopped.pid)
        assert watch.stopped is None  # the watch itself killed nobody
    finally:
        for proc in (stopped, running):
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_a_stopped_worker_ends_the_run_within_the_timeout_naming_its_rank(tmp_path):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "train", "--strategy", "ddp", "--nproc", "2", *SMALL,
                  "--epochs", "100000", "--timeout", "5", "--out", str(out))  # fmt: skip
    try:
        run.wait_for_line("epoch 1/")
        pids = run.worker_pids()
        assert sorted(pids) == [0, 1]
        os.kill(pids[1], signal.SIGSTOP)
        stopped_at = time.monotonic()
        code = run.finish(timeout=120)
        elapsed = time.monotonic() - stopped_at
    finally:
        run.kill()
    assert code == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"dpwise: worker rank 1 (pid {pids[1]}) hung: its process was stopped")
    assert "--timeout 5" in last
    assert elapsed < 5 + 15, f"the run ended {elapsed:.1f} s after the stop"
    assert survivors(pids.values()) == []
    assert run.temp_left() == []
    assert not out.exists()  # nothing written: no final.pt, no metrics.json, no temporary file


@pytest.mark.slow
def test_a_busy_peer_is_reported_by_the_collective_timeout(tmp_path):
    """Rank 1 sleeps in its forward (not stopped): rank 0 times out after --timeout and says so."""
    start = time.monotonic()
    proc = run_cli("train", "--strategy", "ddp", "--nproc", "2", "--data", "hangpkg:data",
                   "--batch-size", "8", "--model", "hangpkg:stalling_model", "--epochs", "1",
                   "--timeout", "3", env={"TMPDIR": str(tmp_path)}, timeout=240)  # fmt: skip
    elapsed = time.monotonic() - start
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("dpwise: worker rank 0 failed (exit code 1): it waited longer than ")
    assert "--timeout 3 s for the other workers in a collective" in last
    assert elapsed < 120  # the default timeout (300 s) did not apply
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("torchinductor_")] == []


@pytest.mark.slow
def test_a_stopped_worker_of_a_compare_is_named_in_one_line(tmp_path):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "compare", *SMALL, "--epochs", "2", "--repeats", "10000",
                  "--strategies", "ddp", "--world-sizes", "2",  # the run whose worker stops
                  "--quiet", "--timeout", "5", "--out", str(out))  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        time.sleep(2)  # the workers take their turns
        pids = run.worker_pids()
        os.kill(pids[1], signal.SIGSTOP)
        code = run.finish(timeout=120)
    finally:
        run.kill()
    assert code == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1
    assert re.fullmatch(
        rf"dpwise: the ddp × 2 run failed: worker rank 1 \(pid {pids[1]}\) hung: its process was "
        r"stopped \(SIGSTOP, Ctrl-Z, a debugger\) for \d+ s while the other workers waited for "
        r"it \(--timeout 5\); dpwise killed it and ended the run: find what stops it, or raise "
        r"--timeout if such pauses are expected",
        lines[0],
    )
    assert survivors(pids.values()) == []
    assert not out.exists()
    assert run.temp_left() == []
