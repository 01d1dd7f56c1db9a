import re
from pathlib import Path

import pytest

from dpwise.errors import DpwiseError
from dpwise.train.config import TrainConfig
from dpwise.workload.settings import parse_kv


def test_parse_kv_types():
    got = parse_kv(["layers=4", "dim=256", "dropout=0.1", "bias=false", "act=gelu"], "--model-arg")
    assert got == {"layers": 4, "dim": 256, "dropout": 0.1, "bias": False, "act": "gelu"}


def test_parse_kv_rejects_missing_equals():
    with pytest.raises(DpwiseError, match="not KEY=VALUE"):
        parse_kv(["layers"], "--model-arg")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "horovod"}, "--strategy 'horovod' is not one of single, dp, ddp"),
        ({"precision": "fp8"}, "--precision 'fp8' is not one of"),
        ({"strategy": "ddp", "nproc": 0}, "--nproc must be at least 1, got 0"),
        ({"batch_size": 0}, "--batch-size must be at least 1"),
        ({"accum_steps": 0}, "--accum-steps must be at least 1"),
        ({"lr": 0.0}, "--lr must be positive"),
        ({"strategy": "single", "nproc": 2}, "--nproc/--nnodes need --strategy ddp"),
        ({"strategy": "ddp", "nnodes": 2}, "needs --rdzv-endpoint"),
        ({"checkpoint_every": 5}, "--checkpoint-every needs --out"),
    ],
)
def test_config_rejects_with_a_useful_message(kwargs, message):
    with pytest.raises(DpwiseError, match=re.escape(message)):
        TrainConfig(**kwargs)


def test_checkpoint_path_lives_in_out():
    cfg = TrainConfig(out=Path("runs/x"), checkpoint_every=3)
    assert cfg.checkpoint_path == Path("runs/x/checkpoint.pt")
    assert cfg.to_dict()["out"] == "runs/x"
