"""`dpwise compare --script` with scripts that fail: one that never steps, one whose rank hangs,
one that needs arguments it was not given, and Ctrl-C meanwhile. Each is one line, exit code 1
for a failed run and 2 for a mistake in the command line, nothing in --out and no process left."""

from __future__ import annotations

import os
import shutil
import time
from multiprocessing import forkserver, resource_tracker
from pathlib import Path

import pytest
from live_run import LiveRun, ctrl_c_ends_it_all, survivors

from conftest import descendants
from dpwise.userscript import stacks
from dpwise.userscript.run import refused_arguments

SCRIPTS = Path(__file__).parent.parent / "userscripts"
FEW = ["--repeats", "1", "--max-steps", "2", "--quiet"]


@pytest.fixture
def home(tmp_path, monkeypatch):
    """The scripts in a folder of their own, the working folder meanwhile."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("never_steps.py", "hangs_on_rank1.py", "mlp_single.py"):
        shutil.copy(SCRIPTS / name, folder / name)
    monkeypatch.chdir(folder)
    return folder


def _servers() -> set[int]:
    """The processes that outlive a launch on purpose: the fork server and its resource tracker."""
    return {forkserver._forkserver._forkserver_pid, resource_tracker._resource_tracker._pid}


@pytest.mark.slow
def test_a_script_that_never_steps_says_so_in_one_line(home, run_here):
    out = home / "out"
    got = run_here("compare", "never_steps.py", *FEW, "--out", str(out))
    assert got.returncode == 1
    # 8 steps: 2 untimed, 4 profiled (the first repeat profiles), 2 timed
    assert got.stderr.strip().splitlines() == [
        "dpwise: the never_steps.py run failed: did not reach 8 steps: it ended without an "
        "optimizer step (no optimizer.step() was reached)"  # one process: not "under torchrun"
    ]
    assert not out.exists()


@pytest.mark.slow
def test_a_rank_that_hangs_is_named_with_its_line_at_the_timeout(home, run_here):
    out = home / "out"
    before = descendants(os.getpid())
    started = time.monotonic()
    got = run_here("compare", "--script", "torchrun hangs_on_rank1.py", "--world-sizes", "2",
                   "--timeout", "4", *FEW, "--out", str(out))  # fmt: skip
    assert time.monotonic() - started < 4 + 15  # the workers' start, then the time limit
    assert got.returncode == 1
    assert got.stderr.strip().splitlines() == [
        "dpwise: the hangs_on_rank1.py × 2 run failed: did not end within 4 s under torchrun: "
        "rank 1 went silent at hangs_on_rank1.py line 12 (rank 0 waited for it at "
        "hangs_on_rank1.py line 13); run it by hand to see why"
    ]
    assert not out.exists()
    left = descendants(os.getpid()) - before - _servers()
    assert survivors(left) == [], "workers left running"


@pytest.mark.slow
def test_a_script_without_its_required_argument_shows_its_usage_exit_2(home, run_here):
    """argparse refused the arguments the command line gave the script: the user's mistake in
    that line (argparse's and dpwise's exit code 2), not a run that failed."""
    out = home / "out"
    got = run_here("compare", "mlp_single.py", *FEW, "--out", str(out))
    assert got.returncode == 2
    assert got.stderr.strip().splitlines() == [
        "dpwise: error: mlp_single.py refused its arguments (mlp_single.py: error: the following "
        "arguments are required: --data; usage: mlp_single.py [-h] --data DATA [--batch-size "
        "BATCH_SIZE]): give them in its command line, as in --script 'mlp_single.py ARGS'"
    ]
    assert not out.exists()


@pytest.mark.slow
def test_ctrl_c_during_a_script_compare_leaves_no_process_and_no_out(tmp_path):
    out = tmp_path / "out"
    script = SCRIPTS / "hangs_on_rank1.py"  # rank 0 waits for rank 1, which never comes
    run = LiveRun(tmp_path / "tmp", "compare", "--script", f"torchrun {script}", "--world-sizes",
                  "2", "--timeout", "120", *FEW, "--out", str(out))  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 120, "the script's two workers")
    except BaseException:
        run.kill()
        raise
    ctrl_c_ends_it_all(run)
    assert not out.exists()


DUMP = """\
epoch 0
Timeout (0:00:04.999992)!
Thread 0x00007f0000000002 (most recent call first):
  File "/usr/lib/python3.11/threading.py", line 320 in wait
  File "/usr/lib/python3.11/threading.py", line 622 in wait
Thread 0x00007f0000000001 (most recent call first):
  File "{torch}/distributed/distributed_c10d.py", line 4159 in barrier
  File "/home/u/project/train.py", line {line} in <module>
  File "<frozen runpy>", line 88 in _run_code
"""


def test_the_dumps_name_the_silent_process_and_who_waited_for_it(tmp_path):
    torch = "/venv/lib/python3.11/site-packages/torch"
    (tmp_path / "r0.log").write_text(DUMP.format(torch="/home/u/lib", line=9))  # its own code
    (tmp_path / "r1.log").write_text(DUMP.format(torch=torch, line=14))  # in a collective
    (tmp_path / "r2.log").write_text("killed before its dump\n")
    logs = {f"rank {r}": tmp_path / f"r{r}.log" for r in range(3)}
    found = stacks.stopped(logs, "train.py")
    assert found == [
        stacks.Stopped("rank 0", "train.py line 9", waiting=False),
        stacks.Stopped("rank 1", "train.py line 14", waiting=True),
    ]
    assert stacks.describe(found) == (
        "rank 0 went silent at train.py line 9 (rank 1 waited for it at train.py line 14)"
    )
    waiting = [stacks.Stopped(f"rank {r}", f"train.py line {r}", True) for r in (1, 2)]
    assert stacks.describe(waiting) == (
        "every process waited for another in torch (rank 1 at train.py line 1, rank 2 at "
        "train.py line 2)"
    )
    assert stacks.describe([]) == ""


def test_a_wrapped_usage_line_is_joined_and_only_exit_code_2_before_a_step_counts(tmp_path):
    log = "usage: t.py [-h] --data DATA\n            [--lr LR]\nt.py: error: argument --lr: bad\n"
    (tmp_path / "verify-rank0.log").write_text(log)
    ended = tmp_path / "verify-ended-rank0"
    ended.write_text("it exited with code 2 after 0 of 4 steps")
    said = "refused its arguments (t.py: error: argument --lr: bad; usage: t.py [-h] --data DATA"
    assert refused_arguments(tmp_path) == f"{said} [--lr LR])"
    ended.write_text("it exited with code 2 after 1 of 4 steps")  # it started: a failed run
    assert refused_arguments(tmp_path) == ""


def test_a_script_that_ends_early_is_told_compares_flag_after_the_untimed_steps(monkeypatch):
    from dpwise.userscript.harness import _short

    monkeypatch.setenv("DPWISE_SCRIPT_FEWER", "--max-steps 2")
    said = "it ended after 5 of 12 optimizer steps: give it more data or epochs in its command line"
    assert _short(5, 12) == f"{said}, or lower --max-steps to 3"
    assert _short(2, 12).endswith("steps: give it more data or epochs in its command line")
    monkeypatch.delenv("DPWISE_SCRIPT_FEWER")  # migrate --verify's own flags
    assert _short(5, 12).endswith("through --script-args, or lower --verify-steps to 5")
