"""A process dpwise started ends when the process that started it dies, however it dies: a
launched worker with its launcher (compare's ddp × 2 run process killed with kill -9:
test_compare_sigterm), not only with the fork server, its parent for the kernel. The kernel
sends it SIGKILL as its starter's end of their multiprocessing pipe closes (dpwise.launch.forking).

A command killed with kill -9 that is its workers' launcher itself (train, tune) says nothing
after its death either: not its workers, not multiprocessing's resource tracker (which removes
the semaphores the killed launcher left).
"""

from __future__ import annotations

import multiprocessing.process
import os
import signal
import time
from pathlib import Path

import pytest
from live_run import LiveRun, survivors

from dpwise.infra import scratch
from dpwise.launch import tether

ENDS_WITHIN_S = 1.0


class _Parent:
    def __init__(self, sentinel: int) -> None:
        self.sentinel = sentinel


def _tied_child(parent_ends_first: bool) -> tuple[int, int]:
    """A child tied (the tether's after-fork tie) to a pipe's write end, which this test holds as
    its starter would: (child pid, the write end), once the tie holds."""
    read_end, write_end = os.pipe()
    tied_r, tied_w = os.pipe()
    if parent_ends_first:
        os.close(write_end)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            if not parent_ends_first:
                os.close(write_end)  # its starter's end is not the child's
            multiprocessing.process._parent_process = _Parent(read_end)  # type: ignore[attr-defined]
            tether._tie_to_parent(None)
            os.write(tied_w, b"1")
            time.sleep(30)
        finally:
            os._exit(0)
    os.close(read_end)
    os.close(tied_w)
    said = os.read(tied_r, 1)  # b"": it ended before saying so
    os.close(tied_r)
    assert said == (b"" if parent_ends_first else b"1")
    return pid, write_end


def _ended_by(pid: int) -> int | None:
    """The signal that ended the child within ENDS_WITHIN_S (None: it did not end so)."""
    deadline = time.monotonic() + ENDS_WITHIN_S
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        time.sleep(0.005)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return None


def test_a_started_process_is_killed_by_the_kernel_when_its_starter_ends() -> None:
    pid, write_end = _tied_child(parent_ends_first=False)
    assert os.waitpid(pid, os.WNOHANG) == (0, 0)  # alive while its starter is
    os.close(write_end)  # what the kernel does as the starter dies, however it dies
    assert _ended_by(pid) == signal.SIGKILL


def test_a_started_process_whose_starter_ended_before_the_tie_ends_at_once() -> None:
    pid, _ = _tied_child(parent_ends_first=True)
    assert _ended_by(pid) == signal.SIGKILL


@pytest.mark.slow
def test_a_killed_ddp_train_says_nothing_after_its_death(tmp_path: Path) -> None:
    run = LiveRun(tmp_path / "tmp", "train", "--strategy", "ddp", "--nproc", "2", "--data",
                  "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model",
                  "--epochs", "100000", "--quiet")  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the two workers")
        workers = list(run.worker_pids().values())
        os.kill(run.proc.pid, signal.SIGKILL)  # the launcher: train launches its workers itself
        assert survivors(workers, grace=ENDS_WITHIN_S) == []
        code = run.finish(timeout=10)  # none of its processes left; its stderr read to the end
    finally:
        run.kill()
    assert code == -signal.SIGKILL
    assert run.stderr == ""


def test_the_folders_a_killed_child_left_go_after_the_block_that_started_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """compare's runs: a run's process killed with kill -9 leaves its launch's folder."""
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv(scratch.COMMAND_ENV, str(os.getpid()))
    mine = scratch.make("trace")  # the command's own, from before: kept
    with scratch.left_behind():
        child = os.fork()
        if child == 0:  # pragma: no cover - the child
            scratch.make("launch")
            os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(child, 0)
        assert len(list(tmp_path.iterdir())) == 2
    assert list(tmp_path.iterdir()) == [mine]
