"""--precision: autocast bf16/fp16 trains, keeps float32 weights, and differs from fp32."""

import math

import pytest
import torch

from conftest import max_abs_diff
from dpwise.train.precision import Precision
from helpers_train import train_here


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_with_float32_master_weights(tmp_path, precision):
    kw = {"epochs": 1, "max_steps": 10, "data_args": {"samples": 2560}}
    ref, _ = train_here(tmp_path / "fp32", **kw)
    state, metrics = train_here(tmp_path / precision, precision=precision, **kw)
    assert all(t.dtype == torch.float32 for t in state.values())
    assert all(math.isfinite(loss) for loss in metrics["losses"])
    diff = max_abs_diff(ref, state)
    assert 0 < diff < 1e-2  # autocast really ran, and training stayed close to fp32


def test_one_grad_scaler_only_for_fp16():
    assert Precision("fp16", "cpu").scaler is not None
    assert Precision("bf16", "cpu").scaler is None
    assert Precision("fp32", "cpu").scaler is None
