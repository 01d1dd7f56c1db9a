"""Faults that end in one line: a full disk, a file-size limit, a refused pickle, a bad
--data-arg, a stray TORCHELASTIC_RUN_ID, a factory that exits or raises."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import disks
import pytest
import torch

from conftest import FIXTURES, child_env, run_cli

TINY = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]


def _one_line(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def full_fs(tmp_path: Path):
    """A real 64 KiB tmpfs: the smallest file system that fills up."""
    with disks.tmpfs(tmp_path / "small", "64k") as mnt:
        yield mnt


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*") if p.name.endswith(".tmp"))


def test_a_full_disk_names_the_file_and_replaces_nothing(full_fs: Path, run_here) -> None:
    out = full_fs / "o"  # the default model's final.pt (2 MB) cannot fit in 64 KiB
    proc = run_here("train", "--epochs", "1", "--max-steps", "2", "--quiet", "--out", str(out))
    line = _one_line(proc)
    assert "no space left on device" in line and str(full_fs / "o" / "final.pt") in line
    assert _leftovers(full_fs) == []


def test_every_file_dpwise_writes_says_no_space(full_fs: Path) -> None:
    from dpwise.errors import DpwiseError
    from dpwise.report.files import write_reports
    from dpwise.results.document import Results
    from dpwise.train import checkpoint, outputs

    ballast = full_fs / "ballast"
    with open(ballast, "wb") as fh, pytest.raises(OSError):
        fh.write(b"\0" * 128 * 1024)  # fill the file system to the last byte
    results = Results.from_json(json.loads((FIXTURES / "results_sample.json").read_text()))
    writes = {
        "checkpoint.pt": lambda: checkpoint.save(full_fs / "checkpoint.pt", {"x": torch.ones(99)}),
        "metrics.json": lambda: outputs.write_json({"x": "y" * 9999}, full_fs / "metrics.json"),
        "report": lambda: write_reports(results, full_fs / "report"),
    }
    for name, write in writes.items():
        with pytest.raises(DpwiseError, match="no space left on device") as info:
            write()
        assert name in str(info.value) and "\n" not in str(info.value)
    assert _leftovers(full_fs) == []


def _file_size_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of death by SIGXFSZ
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))


def test_a_file_size_limit_is_one_line(tmp_path: Path) -> None:
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "dpwise", "train", *TINY, "--epochs", "1", "--quiet"]
    proc = subprocess.run(
        [*cmd, "--out", str(out)],
        capture_output=True,
        text=True,
        env=child_env(),
        preexec_fn=_file_size_limit,
        timeout=300,
    )
    line = _one_line(proc)
    assert "file too large" in line and str(out / "final.pt") in line
    assert _leftovers(tmp_path) == []


class _Evil:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def test_refused_pickles_are_one_line_and_never_run(tmp_path: Path, run_here) -> None:
    marker = tmp_path / "ran"
    torch.save({"format": "dpwise-checkpoint", "x": _Evil(marker)}, tmp_path / "evil.pt")
    (tmp_path / "plain.pkl").write_bytes(b"\x80\x04\x95\x05\x00\x00\x00\x00\x00\x00\x00}\x94.")
    for name in ("evil.pt", "plain.pkl"):
        args = ["--resume", str(tmp_path / name), "--out", str(tmp_path)]
        proc = run_here("train", "--quiet", *args)
        line = _one_line(proc)
        assert "not a readable checkpoint" in line and "\x1b[" not in line
    assert not marker.exists()


def test_a_bad_data_arg_is_one_line(run_here) -> None:
    line = _one_line(run_here("train", "--quiet", "--data-arg", "samples=abc"))
    assert "--data-arg samples must be a positive integer, got 'abc'" in line


def test_a_factory_that_exits_is_named_with_its_code(tmp_path: Path, run_here, monkeypatch) -> None:
    (tmp_path / "exiting.py").write_text("import sys\n\ndef model():\n    sys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    proc = run_here("train", "--quiet", "--model", "exiting:model")
    assert _one_line(proc) == (
        "dpwise: error: --model exiting:model: the factory called sys.exit(3) instead of returning"
    )


@pytest.mark.slow
def test_a_stray_torchelastic_run_id_is_ignored(tmp_path: Path) -> None:
    """A fresh process: in this one the fork server (started once, by whichever test is first)
    would keep the stray variable for every later test's processes, or never see it."""
    args = ["train", *TINY, "--strategy", "ddp", "--nproc", "2", "--max-steps", "2", "--quiet"]
    proc = run_cli(*args, "--out", str(tmp_path / "o"), env={"TORCHELASTIC_RUN_ID": "stray"})
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "o" / "final.pt").exists()


def test_compare_with_a_factory_that_raises_leaves_no_out(tmp_path: Path, run_here) -> None:
    out = tmp_path / "new" / "report"
    args = ["compare", "--model", "userpkg:tiny_model", "--data", "userpkg:failing_data"]
    line = _one_line(run_here(*args, "--epochs", "2", "--repeats", "1", "--out", str(out)))
    assert "--data userpkg:failing_data: the factory raised ValueError: no data here" in line
    assert not (tmp_path / "new").exists()
