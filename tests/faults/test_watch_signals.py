"""`dpwise watch` ended by the user while the job it watches waits (Ctrl-C to the terminal's
group, SIGTERM or SIGKILL to dpwise alone): it ends with the code of the signal, and no process
of the job outlives it (counted by a tag in every process's environment, not by parentage)."""

from __future__ import annotations

import os
import shutil
import signal
from pathlib import Path

import pytest
from live_run import LiveRun

HANGS = Path(__file__).parents[1] / "hangs"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("sig", "group", "code"),
    [(signal.SIGINT, True, 130), (signal.SIGTERM, False, 143), (signal.SIGKILL, False, -9)],
    ids=["ctrl-c", "sigterm", "kill-9"],
)
def test_a_watch_ended_by_a_signal_leaves_no_process_of_the_job(
    tmp_path, monkeypatch, sig, group, code
):
    job = tmp_path / "job"
    shutil.copytree(HANGS, job)
    out = job / "watch"
    monkeypatch.chdir(job)  # the command's folder: the job's scripts import their sibling
    run = LiveRun(tmp_path / "tmp", "watch", "--hang-after", "60", "--status-every", "0",
                  "--out", str(out), "--", "torchrun", "--nproc_per_node=2",
                  str(job / "sleeps.py"))  # fmt: skip
    try:
        run.wait_for(lambda: all((out / f"rank{r}.json").exists() for r in (0, 1)), 120,
                     "both ranks' states")  # fmt: skip
        assert len(run.tagged()) >= 4  # dpwise, its fork server, the job's two ranks
        if group:
            os.killpg(run.proc.pid, sig)
        else:
            os.kill(run.proc.pid, sig)
        assert run.finish(timeout=60) == code, run.stderr
    finally:
        run.kill()
    assert run.outlived() == []
