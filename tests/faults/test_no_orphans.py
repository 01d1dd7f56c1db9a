"""No process and no temporary folder of dpwise's outlives the command that started it, even when
the command is killed with SIGKILL (nothing of it runs then); and compare's own run processes,
stopped or killed, end the comparison in one line naming the run.

Every process is counted by a tag in its environment (live_run.TAG), not by its parentage: an
orphan is re-parented, which a walk down from the command would miss.
"""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from live_run import LiveRun, children

from dpwise.infra import scratch

SMALL = ["--data", "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model"]
# The reference run (single: a run process of its own) and ddp × 2 (a run process, its workers)
COMPARE = ["compare", *SMALL, "--epochs", "2", "--repeats", "10000", "--quiet",
           "--strategies", "ddp", "--world-sizes", "2"]  # fmt: skip
FOREVER = """
import time
import torch
from torch import nn
model = nn.DataParallel(nn.Linear(4, 2).cuda())
while True:  # a script that never ends: --verify's launch must not outlive dpwise
    model(torch.randn(8, 4).cuda()).sum().backward()
    time.sleep(0.01)
"""


def _server(run: LiveRun) -> int:
    """The command's fork server: the parent of every process it starts."""
    for pid in children(run.proc.pid):
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        if b"forkserver" in cmdline:
            return pid
    raise AssertionError("no fork server")


def _run_processes(run: LiveRun) -> list[int]:
    """compare's run processes, in the matrix's order (single first): the server's children
    that are no launched worker."""
    workers = set(run.worker_pids().values())
    return [p for p in children(_server(run)) if p not in workers]


def _killed_with_sigkill(run: LiveRun, ready, what: str) -> None:  # type: ignore[no-untyped-def]
    try:
        run.wait_for(ready, 240, what)
        before = run.tagged()
        assert len(before) >= 4, before  # the command, its server and what that started
        os.kill(run.proc.pid, signal.SIGKILL)  # the command alone: its group is not signalled
        run.proc.wait(timeout=10)
        assert run.outlived() == []
        deadline = time.monotonic() + 5
        while run.temp_left() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert run.temp_left() == []
    finally:
        for pid in run.tagged():  # never leave one behind, whatever failed above
            os.kill(pid, signal.SIGKILL)
        run.kill()


@pytest.mark.slow
def test_a_killed_ddp_train_leaves_no_worker_and_no_folder(tmp_path):
    run = LiveRun(tmp_path / "tmp", "train", "--strategy", "ddp", "--nproc", "2", *SMALL,
                  "--epochs", "100000")  # fmt: skip
    _killed_with_sigkill(run, lambda: any(x.startswith("epoch 2/") for x in run.lines), "epoch 2")


@pytest.mark.slow
def test_a_killed_compare_leaves_no_run_process_no_worker_and_no_folder(tmp_path):
    run = LiveRun(tmp_path / "tmp", *COMPARE, "--out", str(tmp_path / "out"))
    _killed_with_sigkill(run, lambda: len(run.worker_pids()) == 2, "the ddp × 2 run's workers")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_a_killed_migrate_verify_of_an_endless_script_leaves_nothing(tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(FOREVER)
    run = LiveRun(tmp_path / "tmp", "migrate", str(script), "--verify")
    _killed_with_sigkill(run, lambda: len(run.worker_pids()) == 2, "the original's two workers")


@pytest.mark.slow
def test_a_stopped_run_process_ends_the_compare_within_its_timeout(tmp_path):
    run = LiveRun(tmp_path / "tmp", *COMPARE, "--timeout", "5", "--out", str(tmp_path / "out"))
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        single = _run_processes(run)[0]
        os.kill(single, signal.SIGSTOP)
        stopped = time.monotonic()
        code = run.finish(timeout=60)
        took = time.monotonic() - stopped
    finally:
        run.kill()
    assert code == 1
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"dpwise: the single run failed: its process \(pid {single}\) was stopped \(SIGSTOP, "
        r"Ctrl-Z, a debugger\) for \d+ s \(--timeout 5, at least 10 s for a run process\); "
        r"dpwise ended the comparison: .*",
        lines[0],
    )
    assert took < 10 + 20  # the silence, the watch's pace, the other runs' stop
    assert run.outlived() == []
    assert run.temp_left() == []


@pytest.mark.slow
def test_a_killed_run_process_is_named_with_its_signal_in_one_line(tmp_path):
    """Without --quiet: the progress bar is drawn on a terminal only, never above the line."""
    loud = [a for a in COMPARE if a != "--quiet"]
    run = LiveRun(tmp_path / "tmp", *loud, "--out", str(tmp_path / "out"))
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        single = _run_processes(run)[0]
        os.kill(single, signal.SIGKILL)
        code = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 1
    assert run.stderr.strip().splitlines() == [
        f"dpwise: the single run failed: its process (pid {single}) was killed by SIGKILL"
    ]
    assert run.outlived() == []


def test_folders_of_commands_that_died_are_removed_by_the_next(tmp_path, monkeypatch):
    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path))
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)  # a pid no process has now
    monkeypatch.setenv(scratch.COMMAND_ENV, str(dead))
    left = scratch.make("launch")
    (left / "worker.0.pid").write_text("1")
    monkeypatch.setenv(scratch.COMMAND_ENV, str(os.getpid()))
    mine = scratch.make("verify")
    other_ns = tmp_path / f"dpwise-launch-1.{dead}-abcdefgh"  # another pid namespace's: kept
    other_ns.mkdir()
    fresh = scratch.make("trace")  # the next command's first folder clears the dead one's
    assert not left.exists()
    assert mine.exists() and fresh.exists() and other_ns.exists()


def test_a_dead_commands_staging_is_left_when_a_live_run_holds_that_out(tmp_path, monkeypatch):
    """A compare killed with its whole tree (nobody cleaned), then another compare on the same
    --out: the dead one's listed staging folder is now the live one's, and stays."""
    from dpwise.infra.outlock import locked

    monkeypatch.setattr(scratch.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    out = tmp_path / "out"
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    monkeypatch.setenv(scratch.COMMAND_ENV, str(dead))
    scratch.own(scratch.TREE, out / ".dpwise-partial")
    monkeypatch.setenv(scratch.COMMAND_ENV, str(os.getpid()))
    with locked(out):  # the live run
        (out / ".dpwise-partial").mkdir()
        scratch.remove_stale()
        assert (out / ".dpwise-partial").is_dir()
    scratch.remove_stale()  # nothing listed is left to remove, and nothing breaks
    assert not [p for p in (tmp_path / "tmp").iterdir() if f".{dead}-" in p.name]
