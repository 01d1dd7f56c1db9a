"""Damaged, foreign or misplaced checkpoints: one line, exit 2; a killed write leaves no litter."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
import torch

from conftest import FIXTURES, child_env
from dpwise.cli import main
from helpers_train import train_here

TINY = {"model": "userpkg:tiny_model", "data": "userpkg:tiny_data", "batch_size": 8}
TINY_ARGS = ["--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]


@pytest.fixture(scope="module")
def _trained(tmp_path_factory):
    """One run's folder for the whole file: each test damages its own copy."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(FIXTURES))
        out = tmp_path_factory.mktemp("saved")
        train_here(out, epochs=2, max_steps=12, checkpoint_every=6, **TINY)
    return out


@pytest.fixture
def saved(tmp_path, userpkg, _trained):
    """A real checkpoint of the tiny workload (8 steps per epoch), written mid-epoch 2."""
    shutil.copytree(_trained, tmp_path, dirs_exist_ok=True)
    return tmp_path / "checkpoint.pt"


def _edit(path, change):
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


def _refused(path, capsys, *extra):
    args = ["train", "--quiet", *TINY_ARGS, "--epochs", "2", "--out", str(path.parent)]
    code = main([*args, "--resume", str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_truncated(saved, capsys):
    saved.write_bytes(saved.read_bytes()[: saved.stat().st_size // 2])
    assert "not a readable checkpoint" in _refused(saved, capsys)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s.pop("fingerprint"), "its 'fingerprint' is missing or not a dict"),
        (lambda s: s.update(fingerprint="tiny"), "its 'fingerprint' is missing or not a dict"),
        (lambda s: s["fingerprint"].pop("seed"), "its fingerprint lacks seed"),
        (lambda s: s.update(position={"epoch": "1"}), "position {'epoch': '1'} is not"),
        (lambda s: s.pop("optimizer"), "its 'optimizer' is missing"),
    ],
)
def test_malformed(saved, capsys, change, expected):
    _edit(saved, change)
    assert expected in _refused(saved, capsys)


def test_wrong_fingerprint(saved, capsys):
    _edit(saved, lambda s: s["fingerprint"].update(seed=7))
    assert "written with other settings (seed 7 → 0)" in _refused(saved, capsys)


def test_shapes_from_another_model(saved, capsys):
    other = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    _edit(saved, lambda s: s.update(model=other.state_dict()))
    err = _refused(saved, capsys)
    assert "shapes differ: 0.weight (16, 4) → (8, 4)" in err and "model factory changed" in err


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        ({"epoch": 40, "step_in_epoch": 0, "global_steps": 320}, "past the end of this run (16"),
        ({"epoch": 1, "step_in_epoch": 9, "global_steps": 17}, "does not fit 8 steps per epoch"),
    ],
)
def test_position_out_of_range(saved, capsys, position, expected):
    _edit(saved, lambda s: s.update(position=position))
    assert expected in _refused(saved, capsys)


@pytest.mark.slow
def test_changed_model_factory_is_refused_before_any_worker_starts(tmp_path, run_here, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    factory = pkg / "changing.py"
    factory.write_text(
        "from torch import nn\n"
        "def build():\n    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))\n"
    )
    args = ["train", "--quiet", "--model", "changing:build", "--data", "userpkg:tiny_data"]
    args += ["--batch-size", "8", "--out", str(tmp_path / "o")]
    monkeypatch.syspath_prepend(str(pkg))
    # the edit below keeps the file's size, maybe its mtime's second too: no bytecode cached
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    assert run_here(*args, "--checkpoint-every", "4").returncode == 0
    factory.write_text(factory.read_text().replace("8", "6"))
    monkeypatch.delitem(sys.modules, "changing")  # the changed factory, as a new process sees it
    proc = run_here(*args, "--strategy", "ddp", "--nproc", "2", "--resume")
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "shapes differ: 0.weight (8, 4) → (6, 4)" in proc.stderr


WRITER = """
import sys, time
from pathlib import Path
from dpwise.infra.atomic import atomic_file
with atomic_file(Path(sys.argv[1])) as fh:
    fh.write(b"half a checkpoint")
    fh.flush()
    time.sleep(120)
"""


def test_temporary_file_of_a_killed_write_is_removed_by_the_next_run(tmp_path, userpkg):
    out = tmp_path / "out"
    out.mkdir()
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(out / "checkpoint.pt")], env=child_env()
    )
    deadline = time.monotonic() + 60
    while not list(out.glob(".checkpoint.pt.*.tmp")) and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait()
    [left] = list(out.glob(".checkpoint.pt.*.tmp"))  # what a kill -9 mid-write leaves
    live = out / f".metrics.json.{os.getpid()}-abcd1234.tmp"  # a live writer's: kept
    live.write_bytes(b"")
    code = main(["train", "--quiet", *TINY_ARGS, "--epochs", "1", "--out", str(out)])
    assert code == 0
    assert not left.exists() and live.exists()
    assert not (out / "checkpoint.pt").exists()  # the half-written one never became it


@pytest.fixture(scope="module")
def straight(tmp_path_factory) -> dict:
    """The uninterrupted run's metrics, for both cuts."""
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(FIXTURES))
        return train_here(tmp_path_factory.mktemp("straight"), epochs=3, **TINY)[1]


@pytest.mark.parametrize("max_steps", [12, 11])  # 12: a checkpoint mid-loop; 11: at the end
def test_metrics_after_a_mid_epoch_resume_hold_the_whole_run(
    tmp_path, userpkg, max_steps, straight
):
    train_here(tmp_path / "b", epochs=3, max_steps=max_steps, checkpoint_every=6, **TINY)
    _, resumed = train_here(
        tmp_path / "b", epochs=3, resume=tmp_path / "b" / "checkpoint.pt", **TINY
    )
    assert resumed["resumed_at_step"] == max_steps and len(resumed["losses"]) == 24
    assert resumed["losses"] == pytest.approx(straight["losses"], abs=1e-6)
    for got, want in zip(resumed["epochs"], straight["epochs"], strict=True):
        assert (got["epoch"], got["steps"], got["samples"]) == (want["epoch"], 8, 64)
        assert got["mean_loss"] == pytest.approx(want["mean_loss"], abs=1e-6)
