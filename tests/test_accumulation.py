"""--accum-steps K: equals K× larger batches; ddp skips the all-reduce on non-final micro-steps."""

from contextlib import nullcontext

import pytest
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

from conftest import free_port, load_state, max_abs_diff
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies.ddp import DDPStrategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import train
from dpwise.train.plan import resolve
from dpwise.workload.spec import resolve_workload
from helpers_train import train_here


def test_accumulation_equals_a_larger_batch(tmp_path):
    big, _ = train_here(tmp_path / "big", batch_size=256, epochs=1, momentum=0.9)
    acc, metrics = train_here(
        tmp_path / "acc", batch_size=64, accum_steps=4, epochs=1, momentum=0.9
    )
    assert metrics["global_steps"] == 39
    assert max_abs_diff(big, acc) <= 1e-5


class AlwaysSyncDDP(DDPStrategy):
    """DDP without no_sync: what the engine would do if it forgot to skip the all-reduce."""

    def no_sync(self, model):
        return nullcontext()


def _allreduce_calls(accum_steps: int, monkeypatch, strategy_cls=DDPStrategy) -> int:
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    calls = []

    def counting_hook(state, bucket):
        calls.append(bucket.index())
        return allreduce_hook(None, bucket)

    cfg = TrainConfig(
        strategy="ddp", nproc=1, batch_size=32, accum_steps=accum_steps, max_steps=3,
        data_args={"samples": 512},
    )  # fmt: skip
    env = DistEnv(world_size=1)
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=2), env)
    strategy = strategy_cls(env, "gloo", "cpu", comm_hook=counting_hook)
    result = train(plan, strategy, resolve_workload("simple", {}, None, cfg.data_args)).result
    assert result.global_steps == 3
    return len(calls)


def test_ddp_all_reduces_once_per_optimizer_step(monkeypatch):
    once = _allreduce_calls(1, monkeypatch)
    accumulated = _allreduce_calls(4, monkeypatch)
    assert once > 0
    assert accumulated == once
    assert _allreduce_calls(4, monkeypatch, AlwaysSyncDDP) == 4 * once  # what no_sync saves


@pytest.mark.slow
def test_ddp_accumulation_equals_single_large_batch(tmp_path, run_here):
    single, _ = train_here(tmp_path / "single", batch_size=256, epochs=1)
    proc = run_here(
        "train", "--strategy", "ddp", "--nproc", "2", "--batch-size", "64",
        "--accum-steps", "4", "--epochs", "1", "--quiet", "--out", str(tmp_path / "ddp"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert max_abs_diff(single, load_state(tmp_path / "ddp" / "final.pt")) <= 1e-5
