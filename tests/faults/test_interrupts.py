"""Ctrl-C (SIGINT to the process group, as a terminal sends it) and SIGTERM (to dpwise alone, as
a scheduler sends it): one line, exit code 130 or 143, every worker gone, nothing half-written."""

from __future__ import annotations

import os
import signal
import time

import pytest
from live_run import LiveRun, ctrl_c_ends_it_all, survivors

from dpwise.infra import interrupts
from dpwise.infra.atomic import atomic_files

SMALL = ["--data", "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model"]
LONG = ["--epochs", "100000"]


def _send(run: LiveRun, signum: int, group: bool) -> None:
    if group:
        os.killpg(run.proc.pid, signum)  # what a terminal does on Ctrl-C
    else:
        os.kill(run.proc.pid, signum)  # what a scheduler or `kill PID` does


def test_exit_codes_and_lines_follow_the_signal():
    assert interrupts.exit_code(KeyboardInterrupt()) == 130  # Ctrl-C
    assert interrupts.exit_code(interrupts.Interrupted(signal.SIGTERM)) == 143
    assert interrupts.describe(KeyboardInterrupt()) == "interrupted"
    assert interrupts.describe(interrupts.Interrupted(signal.SIGTERM)) == "interrupted by SIGTERM"


def test_a_ctrl_c_whose_exception_was_swallowed_is_raised_again_by_check():
    with interrupts.terminate_raises():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        except KeyboardInterrupt:
            pass  # what C code that clears any pending error does to it
        with pytest.raises(interrupts.Interrupted) as caught:
            interrupts.check()
        assert interrupts.exit_code(caught.value) == 130
    interrupts.check()  # forgotten once the command is over


def test_a_signal_during_renames_that_belong_together_acts_after_them():
    with interrupts.terminate_raises():
        reached = False
        with pytest.raises(interrupts.Interrupted) as caught, interrupts.deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.05)
            reached = True  # not interrupted inside the block
        assert reached and caught.value.signum == signal.SIGTERM
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # put back afterwards


def test_workers_start_with_ctrl_c_held_even_through_multiprocessing_spawn(userpkg):
    """multiprocessing's resource tracker unblocks SIGINT as it starts: held must survive it."""
    import multiprocessing

    import sigmask  # no torch: the child's start is the resource tracker's, not an import's

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.SimpleQueue()
    with interrupts.children_held():
        proc = ctx.Process(target=sigmask.report_blocked_signals, args=(queue,))
        proc.start()
    proc.join(120)
    assert {int(signal.SIGINT), int(signal.SIGTERM)} <= set(queue.get())
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # put back here


def test_files_that_belong_together_are_all_replaced_or_none(tmp_path):
    a, b = tmp_path / "final.pt", tmp_path / "metrics.json"
    a.write_text("old a")
    with pytest.raises(KeyboardInterrupt), atomic_files(a, b) as (fa, fb):
        fa.write(b"new a")
        raise KeyboardInterrupt  # between the two writes
    assert a.read_text() == "old a" and not b.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["final.pt"]  # no temporary file
    with atomic_files(a, b) as (fa, fb):
        fa.write(b"new a")
        fb.write(b"new b")
    assert (a.read_text(), b.read_text()) == ("new a", "new b")


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_ctrl_c_stops_a_compare_while_its_ddp_workers_run(tmp_path):
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", "compare", *SMALL, "--epochs", "2", "--repeats", "10000",
                  "--strategies", "ddp", "--world-sizes", "2",  # single (a run process) and ddp × 2
                  "--quiet", "--out", str(out))  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        time.sleep(2)  # the workers pass their turns
    except BaseException:
        run.kill()
        raise
    ctrl_c_ends_it_all(run)
    assert not out.exists()
