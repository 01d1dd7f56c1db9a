"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM (to dpwise alone, as
a scheduler sends it): one line, exit code 130 or 143, every worker gone, nothing half-written."""

from __future__ import annotations

import os
import signal
import time

import pytest
from live_run import LiveRun, descendants, survivors

pytestmark = pytest.mark.slow

SMALL = ["--data", "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model"]
LONG = ["--epochs", "100000"]


def _send(run: LiveRun, signum: int, group: bool) -> None:
    if group:
        os.killpg(run.proc.pid, signum)  # what a terminal does on Ctrl-C
    else:
        os.kill(run.proc.pid, signum)  # what a scheduler or `kill PID` does


@pytest.mark.parametrize(
    ("signum", "group", "code", "line"),
    [
        (signal.SIGINT, True, 130, "dpwise: interrupted"),
        (signal.SIGTERM, False, 143, "dpwise: interrupted by SIGTERM"),
    ],
)
def test_a_ddp_train_stops_cleanly_while_its_workers_train(tmp_path, signum, group, code, line):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "train", "--strategy", "ddp", "--nproc", "2", *SMALL, *LONG,
                  "--out", str(out))  # fmt: skip
    try:
        run.wait_for_line("epoch 2/")
        pids = run.worker_pids()
        assert sorted(pids) == [0, 1]
        _send(run, signum, group)
        assert run.finish(timeout=60) == code
    finally:
        run.kill()
    assert run.stderr.strip().splitlines() == [line]
    assert survivors(pids.values()) == []
    assert not out.exists()  # no final.pt, no metrics.json, no temporary file, no empty folder
    assert run.temp_left() == []  # the launch's folder is gone too


def test_a_ctrl_c_while_the_workers_start_prints_one_line_and_no_traceback(tmp_path):
    run = LiveRun(tmp_path / "tmp", "train", "--strategy", "ddp", "--nproc", "2", *SMALL, *LONG)
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 180, "two registered workers")
        pids = run.worker_pids()  # registered: the workers are importing, building, starting
        _send(run, signal.SIGINT, group=True)
        assert run.finish(timeout=60) == 130
    finally:
        run.kill()
    assert run.stderr.strip().splitlines() == ["dpwise: interrupted"]
    assert survivors(pids.values()) == []


def test_sigterm_stops_a_single_process_train_like_ctrl_c(tmp_path):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "train", *SMALL, *LONG, "--out", str(out))
    try:
        run.wait_for_line("epoch 2/")
        _send(run, signal.SIGTERM, group=False)
        assert run.finish(timeout=60) == 143
    finally:
        run.kill()
    assert run.stderr.strip().splitlines() == ["dpwise: interrupted by SIGTERM"]
    assert not out.exists()


def test_ctrl_c_stops_a_compare_while_its_ddp_workers_run(tmp_path):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "compare", *SMALL, "--epochs", "2", "--repeats", "10000",
                  "--quiet", "--out", str(out))  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        time.sleep(2)  # the workers pass their turns
        started = descendants(run.proc.pid)
        _send(run, signal.SIGINT, group=True)
        assert run.finish(timeout=60) == 130
    finally:
        run.kill()
    assert run.stderr.strip().splitlines() == ["dpwise: interrupted"]
    assert survivors(started) == []
    assert not out.exists()
    assert run.temp_left() == []
