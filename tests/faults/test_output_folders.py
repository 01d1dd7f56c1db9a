"""Output folders: another run's checkpoint is not overwritten, one writer per --out, and a
compare's report always describes the runs beside it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import child_env

TINY = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]
TRAIN = ["train", *TINY, "--quiet"]
COMPARE = ["compare", *TINY, "--epochs", "2", "--threads", "1", "--quiet"]


def _files(folder: Path) -> dict[str, bytes]:
    files = (p for p in folder.rglob("*") if p.is_file())
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in files}


def _one_line_error(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for word in words:
        assert word in lines[0], lines[0]


def _start(args: list[str]) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "dpwise", *args]
    return subprocess.Popen(cmd, env=child_env(), stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: subprocess.Popen, what=lambda p: p.exists()) -> None:
    deadline = time.monotonic() + 120
    while not what(path):
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def test_train_refuses_another_runs_checkpoint_unless_told(tmp_path: Path, run_here, capfd):
    """Every run through dpwise.cli.main in this process: the refusal is a line and an exit
    code, which a fresh process would only print the same."""
    out = tmp_path / "out"
    first = run_here(*TRAIN, "--epochs", "1", "--checkpoint-every", "4", "--out", str(out))
    assert first.returncode == 0, first.stderr
    before = _files(out)
    assert "checkpoint.pt" in before

    refused = run_here(*TRAIN, "--epochs", "2", "--out", str(out))
    _one_line_error(refused, str(out), "checkpoint.pt", "--resume", "--overwrite")
    assert _files(out) == before, "a refused run wrote into --out"

    resumed = run_here(*TRAIN, "--epochs", "2", "--resume", "--out", str(out))
    assert resumed.returncode == 0, resumed.stderr
    overwritten = run_here(*TRAIN, "--epochs", "1", "--overwrite", "--out", str(out))
    assert overwritten.returncode == 0, overwritten.stderr
    assert sorted(_files(out)) == ["final.pt", "metrics.json"]  # no checkpoint of another run
    with pytest.raises(SystemExit) as helped:  # argparse's --help exits
        run_here("train", "--help")
    assert helped.value.code == 0 and "--overwrite" in capfd.readouterr().out
    both = run_here(*TRAIN, "--resume", "--overwrite", "--out", str(out))
    _one_line_error(both, "--resume", "--overwrite")


@pytest.mark.slow
def test_one_run_at_a_time_per_out_and_the_lock_dies_with_its_holder(
    tmp_path: Path, run_here
) -> None:
    """The holder is a fresh process (killed with SIGKILL); the others run in this one."""
    out = tmp_path / "out"
    first = _start([*TRAIN, "--epochs", "100000", "--out", str(out)])
    try:
        lock = out / ".dpwise.lock"
        _wait_for(lock, first, lambda p: p.exists() and p.read_text().strip().isdigit())
        for second in (
            run_here(*TRAIN, "--epochs", "1", "--out", str(out)),
            run_here(*COMPARE, "--repeats", "1", "--strategies", "single", "--out", str(out)),
        ):
            _one_line_error(second, f"--out {out}", f"pid {first.pid}")
        assert not (out / "final.pt").exists()
    finally:
        first.kill()  # SIGKILL: no clean-up runs; the kernel drops the lock
        first.wait(timeout=60)
    third = run_here(*TRAIN, "--epochs", "1", "--out", str(out))
    assert third.returncode == 0, third.stderr
    assert sorted(_files(out)) == ["final.pt", "metrics.json"]


@pytest.mark.slow
def test_a_stopped_compare_rerun_leaves_the_old_report_with_its_own_runs(
    tmp_path: Path, run_here
) -> None:
    """The stopped rerun is a fresh process (SIGTERM); the runs before and after run here."""
    out = tmp_path / "out"
    first = run_here(*COMPARE, "--repeats", "1", "--strategies", "single,dp", "--world-sizes", "1",
                    "--out", str(out))  # fmt: skip
    assert first.returncode in (0, 1), first.stderr
    before = _files(out)

    rerun = _start([*COMPARE, "--repeats", "100000", "--strategies", "single", "--world-sizes",
                    "1", "--lr", "0.5", "--out", str(out)])  # fmt: skip
    try:
        _wait_for(out / ".dpwise-partial" / "runs" / "single" / "final.pt", rerun)
        rerun.send_signal(signal.SIGTERM)
        assert rerun.wait(timeout=60) == 143  # 128 + SIGTERM
    finally:
        rerun.kill()
    assert _files(out) == before, "the stopped rerun changed the old report or its runs"
    assert not (out / ".dpwise-partial").exists() and not (out / ".dpwise.lock").exists()

    done = run_here(*COMPARE, "--repeats", "1", "--strategies", "single", "--world-sizes", "1",
                   "--out", str(out))  # fmt: skip
    assert done.returncode in (0, 1), done.stderr
    results = json.loads((out / "results.json").read_text())
    assert [r["id"] for r in results["runs"]] == ["single"]
    left = _files(out)
    assert "runs/single/final.pt" in left and "traces/single.rank0.json" in left
    assert not [name for name in left if "dp" in Path(name).name.split(".")[0]], sorted(left)
