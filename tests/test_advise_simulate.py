"""`dpwise advise --simulate`: PyTorch's own DDP, ZeroRedundancyOptimizer and FSDP2 run on a fake
process group of N ranks (advise.simulate), the busiest rank's peak by category beside the
formula's figure; and the ways it falls back to the formula, saying why."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

SIMPLE_PARAMS = 1000 * 512 + 512 + 512 * 10 + 10  # the guide's SimpleModel


@pytest.mark.slow
def test_every_case_at_eight_ranks_in_mixed_precision_shards_as_pytorch_does(run_here):
    """bf16 (autocast, as dpwise trains), one advise for every case: FSDP2's shards are an eighth
    of the guide's MLP and AdamW's state twice that; ZeRO-1's rank holds less optimizer state
    than DDP's; the formula's figure beside each case it models, and its difference."""
    got = run_here("advise", "--gpus", "8", "--device-memory", "80", "--model", "simple",
                   "--precision", "bf16", "--simulate", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    sims = json.loads(got.stdout)["simulated"]
    assert all(s["why_not"] is None and s["world_size"] == 8 for s in sims.values()), sims
    sim = sims["fsdp"]
    parts = sim["by_category"]
    shard = SIMPLE_PARAMS * 4 / 8  # float32, an eighth per rank (FSDP pads each to a multiple)
    assert shard <= parts["Sharded Param"] <= shard * 1.01
    assert parts["OptState"] == pytest.approx(2 * parts["Sharded Param"], rel=0.01)  # AdamW
    assert sim["peak_bytes"] == parts["Total"] >= sum(v for k, v in parts.items() if k != "Total")
    assert sim["formula_off_by"] == pytest.approx(
        (sim["formula_bytes"] - sim["peak_bytes"]) / sim["peak_bytes"])  # fmt: skip
    ddp, zero1 = sims["ddp"]["by_category"], sims["ddp+zero1"]["by_category"]
    assert zero1["Optstate"] < ddp["Optstate"]
    assert sims["fsdp --no-reshard-after-forward"]["formula_bytes"] is None
    assert sims["ddp+zero1"]["formula_bytes"] > 0


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--params", "7B"], "no model to simulate"),
        (["--model", "simple", "--simulate-timeout", "0.2"], "it did not end within its 0.2 s"),
    ],
    ids=["count-only", "timeout"],
)
def test_what_is_not_simulated_says_why_and_the_formula_stands(run_here, args, why):
    got = run_here("advise", "--gpus", "8", "--device-memory", "80", *args, "--simulate")
    assert got.returncode == 0, got.stderr
    rows = ("ddp", "ddp+zero1", "fsdp", "fsdp --no-reshard-after-forward")
    assert f"{rows[0]} × 8: not simulated: {why}" in got.stdout
    if "0.2 s" in why:  # the rest are not tried: a model that hangs would hang them all
        why = "the case before it ran out of its 0.2 s; give --simulate-timeout more"
    for row in rows[1:]:
        assert f"{row} × 8: not simulated: {why}" in got.stdout
    assert "the formula's figure stands" in got.stdout
    assert "Memory per device (estimate" in got.stdout or "--params" in args[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--gpus", "-8"], "--gpus must be 0 or more, got -8"),
        (["--gpus", "8", "--nodes", "0"], "--nodes must be at least 1, got 0"),
        (["--gpus", "eight"], "invalid int value: 'eight'"),
        (["--gpus", "8", "--nodes", "100000"], "--gpus × --nodes is 800,000 devices, more than"),
        (["--gpus", "8", "--simulate-timeout", "0"], "--simulate-timeout must be positive"),
    ],
    ids=["negative", "no-nodes", "not-a-count", "beyond-any-cluster", "no-time"],
)
def test_a_world_size_that_is_not_a_positive_count_is_one_line_and_exit_2(run_here, args, said):
    got = run_here("advise", "--model", "simple", "--simulate", *args)
    assert got.returncode == 2
    assert said in got.stderr and len(got.stderr.strip().splitlines()) == 1
    assert got.stdout == ""


SMALL = {"model_args": {}, "data": None, "data_args": {}, "loss": "auto",
         "optimizer": "adamw", "momentum": 0.0}  # fmt: skip


@pytest.mark.parametrize(
    ("model", "formula", "why"),
    [
        ("simfaults:routed", None, "fake tensors cannot run it (DynamicOutputShapeException"),
        ("simfaults:hungry", 1, "it ran out of its 4 GiB memory limit"),
        ("simfaults:killed", 1, "its process ended without an answer (-9)"),
    ],
    ids=["data-dependent-shape", "memory-limit", "killed"],
)
def test_a_model_the_simulation_cannot_run_falls_back_saying_why(monkeypatch, model, formula, why):
    """In a process of its own (the fixtures import there as here): a model whose forward reads
    its data (fake tensors have none), and one that exhausts the memory limit (real tensors)."""
    from dpwise.advise import simulate
    from dpwise.advise.cases import cases

    monkeypatch.syspath_prepend(str(FIXTURES))
    case = next(c for c in cases("fp32") if c.row == "ddp")
    (got,) = simulate.simulate({**SMALL, "model": model}, [(case, formula)], 8, 64, 60.0)
    assert got.peak_bytes is None and got.why_not is not None
    assert why in got.why_not, got.why_not


def test_the_private_apis_are_detected_not_assumed(monkeypatch):
    from dpwise.advise import simulate

    assert simulate.missing() is None  # this torch has them
    monkeypatch.setattr(simulate, "PRIVATE", (("torch.no_such_module", "FakeStore"),))
    assert simulate.missing() == "this torch has no torch.no_such_module.FakeStore"


TRANSFORMER = {"layers": 2, "dim": 64, "heads": 4, "vocab": 128}


@pytest.mark.parametrize(
    ("model", "args", "row"),
    [
        ("transformer", TRANSFORMER, "ddp"),
        ("transformer", TRANSFORMER, "ddp+zero1"),
        ("transformer", TRANSFORMER, "fsdp"),
        ("simfaults:tied", {}, "ddp"),
        ("simfaults:tied", {}, "fsdp"),
        ("simple", {}, "fsdp"),
    ],
)
def test_fake_tensors_match_real_ones_at_eight_ranks(monkeypatch, model, args, row):
    """The same steps with fake tensors and with real ones, in this process (a fake process
    group each time): every category matches to the byte, on a transformer, on a model whose
    output layer shares the embedding's weight (fake tensors made two of it once: GPT-2's
    parameters and their AdamW state were counted twice), and on the guide's MLP."""
    from dpwise.advise.cases import cases
    from dpwise.advise.simulate_run import peak

    monkeypatch.syspath_prepend(str(FIXTURES))
    spec = {**SMALL, "model": model, "model_args": args}
    case = next(c for c in cases("fp32") if c.row == row)
    real = peak(spec, case, 8, 4, fake=False)
    fake = peak(spec, case, 8, 4, fake=True)
    assert real == fake and real["Total"] > 0


def test_zero1_formula_shares_the_tensors_out_as_zero_redundancy_optimizer_does():
    """advise's ZeRO-1 figure (estimate.zero1_shares) against torch's own partition, on a fake
    group of 64 ranks: every rank's bytes equal; most ranks own nothing."""
    import torch
    from torch.distributed.optim import ZeroRedundancyOptimizer

    from dpwise.advise.estimate import zero1_shares
    from dpwise.advise.simulate_run import _fake_group
    from dpwise.workload.spec import resolve_workload

    workload = resolve_workload("transformer", {"layers": 4, "dim": 64, "heads": 4}, None, {},
                                "auto")  # fmt: skip
    with torch.device("meta"):
        params = list(workload.build_model().parameters())
    with _fake_group(64, 0):
        zero = ZeroRedundancyOptimizer(params, optimizer_class=torch.optim.AdamW)
        torch_shares = [sum(p.numel() * 4 for g in groups for p in g["params"])
                        for groups in zero._partition_parameters()]  # fmt: skip
    ours = zero1_shares([p.numel() * 4 for p in params], 64)
    assert ours == torch_shares
    assert ours.count(0) > 0 and max(ours) > sum(ours) / 64


def test_zero1_is_simulated_as_the_rank_that_owns_the_most(monkeypatch):
    """Over two ranks ZeroRedundancyOptimizer gives rank 1 both 100×90 weights: the simulation
    runs as rank 1, and its optimizer state is AdamW's two moments of what rank 1 owns."""
    from dpwise.advise.cases import cases
    from dpwise.advise.estimate import zero1_shares
    from dpwise.advise.simulate_run import peak

    monkeypatch.syspath_prepend(str(FIXTURES))
    case = next(c for c in cases("fp32") if c.row == "ddp+zero1")
    got = peak({**SMALL, "model": "simfaults:uneven", "data_args": {"shape": "100"}}, case, 2,
               4, fake=False)  # fmt: skip
    sizes = [100 * 100 * 4, 100 * 4, 100 * 90 * 4, 90 * 4, 90 * 100 * 4, 100 * 4]
    shares = zero1_shares(sizes, 2)
    assert got["rank"] == 1 == shares.index(max(shares))
    assert got["Optstate"] >= 2 * shares[1]


@pytest.mark.parametrize("row", ["ddp", "ddp+zero1", "fsdp"])
def test_every_case_counts_the_ranks_batch(row):
    """The rank's batch (inputs and targets, made before the tracker) is in every case's peak:
    FSDPMemTracker's "Inputs", MemTracker's "Other" (it has no inputs category); before, DDP's
    cases left it out (the guide's MLP at batch 64 on 2 ranks: 128,256 bytes under dpwise's own
    measured ddp run)."""
    from dpwise.advise.cases import cases
    from dpwise.advise.footprint import sample, tensors
    from dpwise.advise.simulate_run import peak
    from dpwise.workload.spec import resolve_workload

    spec = {**SMALL, "model": "simple"}
    workload = resolve_workload("simple", {}, None, {}, "auto")
    batch = sum(t.numel() * t.element_size() for t in tensors(sample(workload.load_data(0), 4)))
    case = next(c for c in cases("fp32") if c.row == row)
    got = peak(spec, case, 2, 4, fake=False)
    assert got["Inputs" if case.shards_model else "Other"] == batch == 4 * (1000 * 4 + 8)


def test_a_model_with_branches_is_simulated_as_its_launch_line_runs_it(run_here, monkeypatch):
    """A head picked by the batch: ddp is simulated with find_unused_parameters, as advise's
    launch line has it (without, its second step fails); fsdp's rows say why fsdp cannot run
    it, as advise does, instead of running it."""
    monkeypatch.syspath_prepend(str(FIXTURES))
    got = run_here("advise", "--gpus", "8", "--device-memory", "80", "--model",
                   "trapmodels:branching_model", "--simulate", "--json")  # fmt: skip
    assert got.returncode == 0, got.stderr
    sims = json.loads(got.stdout)["simulated"]
    assert sims["ddp"]["why_not"] is None and sims["ddp+zero1"]["peak_bytes"] > 0, sims
    for row in ("fsdp", "fsdp --no-reshard-after-forward"):
        assert (
            sims[row]["why_not"].startswith("--strategy fsdp:") and "branch" in sims[row]["why_not"]
        )
