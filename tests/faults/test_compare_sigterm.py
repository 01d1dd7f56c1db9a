"""SIGTERM, SIGINT or kill -9 to one of compare's run processes (not to dpwise): the comparison
ends in one line naming the run, its process and the signal, exit 1, with no traceback and
nothing left. Killed with SIGKILL, the ddp × 2 run's process (its workers' launcher) cannot stop
its workers: the kernel ends them as it dies (dpwise.launch.forking), before any of them complains
of the lost store."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from live_run import LiveRun, children, survivors

SMALL = ["--data", "hangpkg:data", "--batch-size", "8", "--model", "userpkg:tiny_model"]
COMPARE = ["compare", *SMALL, "--epochs", "2", "--repeats", "10000", "--quiet"]
WORKERS_END_S = 1.0  # a SIGKILLed launcher's workers: ended by the kernel; a busy machine's margin


def _ddp_run_process(run: LiveRun) -> int:
    """The ddp × 2 run's process: of the fork server's children that are no launched worker
    (the run processes, in the matrix's order: single, then ddp × 2), the last."""
    server = [p for p in children(run.proc.pid) if b"forkserver" in _cmdline(p)]
    workers = set(run.worker_pids().values())
    found = [p for p in children(server[0]) if p not in workers]
    assert len(found) == 2, found
    return found[-1]


def _cmdline(pid: int) -> bytes:
    with open(f"/proc/{pid}/cmdline", "rb") as fh:
        return fh.read()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_a_signalled_ddp_run_process_is_named_with_its_signal_in_one_line(
    tmp_path: Path, signum: signal.Signals
) -> None:
    """The ddp × 2 run's process runs its workers' launcher: the signal reaches it alone."""
    out = tmp_path / "out"
    run = LiveRun(tmp_path / "tmp", *COMPARE, "--strategies", "ddp", "--world-sizes", "2",
                  "--out", str(out))  # fmt: skip
    try:
        run.wait_for(lambda: len(run.worker_pids()) == 2, 240, "the ddp × 2 run's workers")
        launcher = _ddp_run_process(run)
        workers = list(run.worker_pids().values())
        os.kill(launcher, signum)
        if signum == signal.SIGKILL:  # at once: the launcher's store is gone with it
            assert survivors(workers, grace=WORKERS_END_S) == []
        code = run.finish(timeout=60)
    finally:
        run.kill()
    assert code == 1, run.stderr
    assert run.stderr.strip().splitlines() == [
        f"dpwise: the ddp × 2 run failed: its process (pid {launcher}) was killed by "
        f"{signal.Signals(signum).name}"
    ]
    assert run.outlived() == [] and run.temp_left() == []
    assert not out.exists()
