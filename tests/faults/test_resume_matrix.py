"""Any strategy resumes any strategy's checkpoint, with every optimizer dpwise offers, and a run
resumed at its last step leaves its outputs as they were.

The strategies run in this process as one-member groups (gloo): what is tested is the checkpoint's
layout and its loading (FSDP2's sharded optimizer state included), which a group of one already
goes through; a two-process fsdp resume is in test_fsdp.py.
"""

from __future__ import annotations

import json

import pytest
import torch

from conftest import free_port, max_abs_diff
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies.ddp import DDPStrategy
from dpwise.strategies.fsdp import FSDPStrategy
from dpwise.strategies.single import SingleStrategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import train
from dpwise.train.plan import resolve
from dpwise.train.restart import first_attempt
from dpwise.workload.spec import resolve_workload
from helpers_train import train_here

OPTIMIZERS = {
    "sgd": {"optimizer": "sgd", "momentum": 0.0},  # no per-parameter state at all
    "momentum": {"optimizer": "sgd", "momentum": 0.9},
    "adamw": {"optimizer": "adamw", "lr": 1e-3},
}
STRATEGIES = ("single", "ddp", "fsdp")
STEPS, CUT = 4, 2


def _strategy(name: str, env: DistEnv):
    if name == "single":
        return SingleStrategy(torch.device("cpu"))
    return (DDPStrategy if name == "ddp" else FSDPStrategy)(env, "gloo", "cpu")


def _run(name: str, cfg: TrainConfig) -> dict[str, torch.Tensor]:
    env = DistEnv(world_size=1)
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=2), env)
    workload = resolve_workload("simple", {}, None, cfg.data_args)
    trained = train(plan, _strategy(name, env), workload, attempt=first_attempt(cfg))
    return {k: v.detach().clone() for k, v in trained.state.items()}


@pytest.fixture
def one_member_group(monkeypatch):
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")


@pytest.mark.parametrize("optimizer", list(OPTIMIZERS))
def test_every_strategy_resumes_every_strategys_checkpoint(optimizer, tmp_path, one_member_group):
    settings = {"batch_size": 32, "data_args": {"samples": 256}, **OPTIMIZERS[optimizer]}
    whole = _run("single", TrainConfig(max_steps=STEPS, **settings))
    failures = []
    for writer in STRATEGIES:
        out = tmp_path / writer
        _run(writer, TrainConfig(max_steps=CUT, checkpoint_every=CUT, out=out, **settings))
        for reader in STRATEGIES:
            resume = out / "checkpoint.pt"
            cfg = TrainConfig(max_steps=STEPS, resume=resume, out=out / reader, **settings)
            diff = max_abs_diff(whole, _run(reader, cfg))
            if not diff <= 1e-6:
                failures.append(f"{writer} → {reader}: {diff:.3g}")
    assert not failures, failures


@pytest.mark.parametrize(
    ("cut", "strategy"), [("mid-epoch", "single"), ("epoch end", "single"), ("mid-epoch", "ddp")]
)
def test_resuming_a_finished_run_leaves_its_outputs_and_says_so(cut, strategy, tmp_path, run_here):
    args = ["train", "--checkpoint-every", "4", "--out", str(tmp_path), "--data-arg",
            "samples=512", "--strategy", strategy]  # fmt: skip
    args += ["--max-steps", "8"] if cut == "mid-epoch" else ["--epochs", "1"]
    first = run_here(*args)
    assert first.returncode == 0, first.stderr
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    again = run_here(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert "nothing to train" in again.stdout and "left as they were" in again.stdout
    assert len(again.stdout.strip().splitlines()) == 1, again.stdout
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_a_finished_checkpoint_without_outputs_writes_them_from_the_checkpoint(tmp_path):
    """Killed after the last checkpoint, before final.pt: the resume trains nothing and writes
    the run's outputs, its losses whole."""
    common = {"max_steps": 8, "batch_size": 32, "data_args": {"samples": 512}}
    whole, first = train_here(tmp_path / "a", checkpoint_every=4, **common)
    (tmp_path / "a" / "final.pt").unlink()
    (tmp_path / "a" / "metrics.json").unlink()
    again, metrics = train_here(tmp_path / "a", resume=tmp_path / "a" / "checkpoint.pt", **common)
    assert max_abs_diff(whole, again) == 0
    assert metrics["losses"] == first["losses"] and metrics["final_loss"] == first["final_loss"]
    assert metrics["epochs"][0]["steps"] == 8 and metrics["resumed_at_step"] == 8
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["global_steps"] == 8
