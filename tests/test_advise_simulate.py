"""`dpwise advise --simulate`: FSDP2's own sharding run on a fake process group of N ranks with
fake tensors (advise.simulate), rank 0's peak by category beside the formula's figure; and the
ways it falls back to the formula, saying why."""

from __future__ import annotations

import json

import pytest

SIMPLE_PARAMS = 1000 * 512 + 512 + 512 * 10 + 10  # the guide's SimpleModel


@pytest.mark.slow
def test_fsdp_at_eight_ranks_shards_the_parameters_and_adamw_state_as_pytorch_does(run_here):
    got = run_here("advise", "--gpus", "8", "--device-memory", "80", "--model", "simple",
                   "--simulate", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    sim = json.loads(got.stdout)["simulated"]["fsdp"]
    assert sim["why_not"] is None and sim["world_size"] == 8
    parts = sim["by_category"]
    shard = SIMPLE_PARAMS * 4 / 8  # float32, an eighth per rank (FSDP pads each to a multiple)
    assert shard <= parts["Sharded Param"] <= shard * 1.01
    assert parts["OptState"] == pytest.approx(2 * parts["Sharded Param"], rel=0.01)  # AdamW
    assert sim["peak_bytes"] == parts["Total"] >= sum(v for k, v in parts.items() if k != "Total")
    assert sim["formula_bytes"] > 0
    assert sim["formula_off_by"] == pytest.approx(
        (sim["formula_bytes"] - sim["peak_bytes"]) / sim["peak_bytes"])  # fmt: skip


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--params", "7B"], "no model to simulate"),
        (["--model", "simple", "--precision", "bf16"], "bf16 is not simulated yet (fp32 only)"),
        (["--model", "simple", "--simulate-timeout", "0.2"], "it did not end within its 0.2 s"),
    ],
    ids=["count-only", "mixed-precision", "timeout"],
)
def test_what_is_not_simulated_says_why_and_the_formula_stands(run_here, args, why):
    got = run_here("advise", "--gpus", "8", "--device-memory", "80", *args, "--simulate")
    assert got.returncode == 0, got.stderr
    assert f"fsdp × 8: not simulated: {why}" in got.stdout
    assert "the formula's figure stands" in got.stdout


def test_the_private_apis_are_detected_not_assumed(monkeypatch):
    from dpwise.advise import simulate

    assert simulate.missing() is None  # this torch has them
    monkeypatch.setattr(simulate, "PRIVATE", (("torch.no_such_module", "FakeStore"),))
    assert simulate.missing() == "this torch has no torch.no_such_module.FakeStore"


def test_fake_tensors_match_real_ones_on_a_transformer_at_eight_ranks():
    """The same FSDP2 steps with fake tensors and with real ones, in this process (a fake
    process group each time): on a transformer every category matches to the byte."""
    from dpwise.advise.simulate import _fsdp_peak

    spec = {"model": "transformer", "model_args": {"layers": 2, "dim": 64, "heads": 4,
            "vocab": 128}, "data": None, "data_args": {}, "loss": "auto",
            "optimizer": "adamw", "momentum": 0.0}  # fmt: skip
    real = _fsdp_peak(spec, 8, 4, fake=False)
    fake = _fsdp_peak(spec, 8, 4, fake=True)
    assert real == fake and real["Total"] > 0
