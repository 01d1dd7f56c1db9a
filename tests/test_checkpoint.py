"""Checkpoints: atomic writes, exact resume, and refusal of anything that is not ours."""

import pytest
import torch

from conftest import load_state, max_abs_diff
from dpwise.cli import main
from dpwise.train import checkpoint
from helpers_train import train_here

# The default model on a quarter of its data: 10 steps an epoch (256 rows each), not 39.
ADAMW = {"optimizer": "adamw", "lr": 1e-3, "data_args": {"samples": 2560}}


def test_resume_after_epoch_one_matches_an_uninterrupted_run(tmp_path):
    straight, _ = train_here(tmp_path / "a", epochs=2, **ADAMW)
    train_here(tmp_path / "b", epochs=1, checkpoint_every=1000, **ADAMW)
    resumed, metrics = train_here(
        tmp_path / "b", epochs=2, resume=tmp_path / "b" / "checkpoint.pt", **ADAMW
    )
    assert metrics["resumed_at_step"] == 10 and metrics["global_steps"] == 20
    assert len(metrics["losses"]) == 20 and len(metrics["epochs"]) == 2
    assert max_abs_diff(straight, resumed) <= 1e-6


def test_resume_mid_epoch_with_fp16_scaler_and_rng(tmp_path):
    common = {"precision": "fp16", "momentum": 0.9, "model": "transformer", "batch_size": 32}
    # dropout consumes the RNG: it must be restored
    # 8 steps an epoch of 8-token sequences; cut in the second epoch's middle
    common["model_args"] = {"dropout": 0.1, "layers": 1, "dim": 32, "heads": 2, "seq_len": 8}
    common["data_args"] = {"samples": 256, "seq_len": 8}
    straight, _ = train_here(tmp_path / "a", epochs=2, **common)
    train_here(tmp_path / "b", epochs=2, max_steps=12, checkpoint_every=6, **common)
    state = torch.load(tmp_path / "b" / "checkpoint.pt", weights_only=True)
    assert state["position"] == {"epoch": 1, "step_in_epoch": 4, "global_steps": 12}
    assert state["scaler"]["scale"] > 0
    resumed, _ = train_here(
        tmp_path / "b", epochs=2, resume=tmp_path / "b" / "checkpoint.pt", **common
    )
    assert max_abs_diff(straight, resumed) <= 1e-6


@pytest.mark.slow
def test_ddp_resume_matches_an_uninterrupted_ddp_run(tmp_path, run_here):
    """Through the command in this process: its launched workers are what resume."""
    base = ["train", "--strategy", "ddp", "--nproc", "2", "--quiet", "--momentum", "0.9"]
    base += ["--data-arg", "samples=2560"]  # 10 steps an epoch: the checkpoint is mid-epoch
    runs = [
        [*base, "--epochs", "2", "--out", str(tmp_path / "a")],
        [*base, "--epochs", "1", "--checkpoint-every", "6", "--out", str(tmp_path / "b")],
        [*base, "--epochs", "2", "--resume", "--out", str(tmp_path / "b")],
    ]
    for args in runs:
        proc = run_here(*args)
        assert proc.returncode == 0, proc.stderr
    diff = max_abs_diff(
        load_state(tmp_path / "a" / "final.pt"), load_state(tmp_path / "b" / "final.pt")
    )
    assert diff <= 1e-6


def _resume_error(path, capsys, *extra):
    code = main(["train", "--quiet", "--out", str(path.parent), "--resume", str(path), *extra])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_truncated_checkpoint_is_refused(tmp_path, capsys):
    train_here(tmp_path, epochs=1, max_steps=2, checkpoint_every=2)
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(path.read_bytes()[:5000])
    assert "not a readable checkpoint (truncated or not a dpwise file)" in _resume_error(
        path, capsys
    )


def test_foreign_checkpoint_is_refused(tmp_path, capsys):
    path = tmp_path / "other.pt"
    torch.save({"model": {"w": torch.zeros(2)}}, path)
    assert "not a dpwise checkpoint" in _resume_error(path, capsys)


class Payload:
    def __reduce__(self):
        import pathlib

        return (pathlib.Path.touch, (pathlib.Path(self.target),))


def test_pickled_objects_are_never_unpickled(tmp_path, capsys):
    payload = Payload()
    payload.target = str(tmp_path / "pwned")
    path = tmp_path / "evil.pt"
    torch.save({"format": "dpwise-checkpoint", "x": payload}, path)
    assert "not a readable checkpoint" in _resume_error(path, capsys)
    assert not (tmp_path / "pwned").exists()


def test_checkpoint_from_other_settings_is_refused(tmp_path, capsys):
    train_here(tmp_path, epochs=1, max_steps=2, checkpoint_every=2)
    err = _resume_error(tmp_path / "checkpoint.pt", capsys, "--lr", "0.5")
    assert "written with other settings (lr 0.01 → 0.5)" in err


def test_a_failed_write_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    checkpoint.save(path, {"fingerprint": {}, "n": 1})
    before = path.read_bytes()

    def broken_save(obj, fh):
        fh.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(checkpoint.torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        checkpoint.save(path, {"fingerprint": {}, "n": 2})
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
