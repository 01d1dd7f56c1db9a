"""The profiler window over a user's script's optimizer steps (dpwise.userscript.probe): the
collectives of each profiled step, the CPU's live tensor peak, the trace, inside each rank of a
script run unedited."""

from __future__ import annotations

import json

import pytest
import torch

from dpwise.errors import DpwiseError
from dpwise.userscript.harness import MEASURED
from dpwise.userscript.probe import TRACE, Probe, parse

DDP_SCRIPT = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2)))
opt = torch.optim.Adam(model.parameters(), lr=0.01)
for _ in range(20):
    model(torch.randn(8, 6)).square().mean().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
"""
GRADIENT_BYTES = ((6 * 5 + 5) + (5 * 2 + 2)) * 4  # both Linear layers' weights and biases, float32


def _launched(tmp_path, text, nproc, kind="torchrun"):
    """``text`` launched on ``nproc`` ranks (a "spawns" script: one process, two devices)."""
    from dpwise.userscript.run import launch_script

    script = tmp_path / "train.py"
    script.write_text(text, encoding="utf-8")
    (tmp_path / "run").mkdir()
    out = tmp_path / "run" / "params.pt"
    launch_script(script, [], tmp_path, out, 5, 1 if kind == "spawns" else nproc, timeout=60,
                  measure=True, profile=(2, 3), devices=nproc, kind=kind)  # fmt: skip
    ranks = [json.loads((out.parent / f"{MEASURED}{r}.json").read_text()) for r in range(nproc)]
    return out.parent, [r["profile"] for r in ranks]


def _per_step(profiled, op):
    return next(c for c in profiled["communication"]["collectives"] if c["op"] == op)


def test_each_rank_of_a_ddp_script_profiles_its_gradient_all_reduces(tmp_path):
    """Two ranks, gloo: every profiled step all-reduces the model's gradient bytes (DDP's
    buckets); each rank has a live tensor peak; rank 0's trace is kept, the others' removed."""
    folder, ranks = _launched(tmp_path, DDP_SCRIPT, 2)
    for profiled in ranks:
        assert profiled["profiled_steps"] == 3
        assert _per_step(profiled, "all_reduce")["count_per_step"] > 0
        assert profiled["communication"]["bytes_all_reduced_per_step"] == GRADIENT_BYTES
        assert sum(b["bytes"] for b in profiled["communication"]["buckets"]) == GRADIENT_BYTES
        assert profiled["live_tensor_bytes"] > profiled["live_tensor_bytes_held"] > 0
    assert ranks[0]["trace"] == str(folder / f"{TRACE}0.json")
    assert (folder / f"{TRACE}0.json").is_file()
    assert ranks[1]["trace"] is None and not (folder / f"{TRACE}1.json").exists()


SPAWNING = """\
import os
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP

def train(rank, world):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29500")  # the harness's port instead
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model = DDP(torch.nn.Linear(6, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(20):
        model(torch.randn(8, 6)).sum().backward()
        opt.step()

if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
"""


def test_each_process_a_script_spawns_profiles_into_its_own_trace(tmp_path):
    """A spawned process has no RANK in its environment: its trace is named after its process
    group's rank (two that shared rank 0's file raced, one reading the other's half-written
    trace); rank 0's is kept, rank 1's removed."""
    folder, ranks = _launched(tmp_path, SPAWNING, 2, kind="spawns")
    for profiled in ranks:
        assert profiled["communication"]["bytes_all_reduced_per_step"] == (6 * 2 + 2) * 4
    assert ranks[0]["trace"] == str(folder / f"{TRACE}0.json")
    assert (folder / f"{TRACE}0.json").is_file()
    assert ranks[1]["trace"] is None and not (folder / f"{TRACE}1.json").exists()


SINGLE = """\
import torch

model = torch.nn.Linear(6, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(20):
    model(torch.randn(8, 6)).sum().backward()
    opt.step()
    opt.zero_grad()
"""


def test_a_single_process_script_has_no_collectives_but_a_live_peak(tmp_path):
    folder, (profiled,) = _launched(tmp_path, SINGLE, 1)
    assert all(c["count_per_step"] == 0 for c in profiled["communication"]["collectives"])
    assert profiled["communication"]["bytes_all_reduced_per_step"] == 0
    assert profiled["live_tensor_bytes"] > 0
    assert (folder / f"{TRACE}0.json").is_file()


def _train(probe: Probe, steps: int, set_to_none: bool) -> None:
    """A loop whose optimizer's post-hook drives ``probe``, as the harness's does."""
    torch.manual_seed(0)
    model = torch.nn.Linear(64, 32)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    handle = opt.register_step_post_hook(lambda o, args, kwargs: probe.step(o))
    try:
        for _ in range(steps):
            model(torch.randn(16, 64)).sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=set_to_none)
    finally:
        handle.remove()


@pytest.mark.parametrize("set_to_none", [True, False])
def test_the_tensors_held_through_the_window_are_the_ones_it_did_not_allocate(
    tmp_path, set_to_none
):
    """Parameters and momentum live through the window (allocated before it, unseen by the
    profiler's memory recording): counted once; gradients too when zero_grad keeps them, and
    not when they are freed and allocated anew inside the window (its own peak has them)."""
    probe = Probe(2, 2, tmp_path / "out.pt", rank=0)
    _train(probe, 6, set_to_none)
    profiled = probe.result()
    params = (64 * 32 + 32) * 4
    held = params * (2 if set_to_none else 3)  # parameters, momentum (and gradients)
    assert profiled["live_tensor_bytes_held"] == held
    assert profiled["live_tensor_bytes"] > held
    assert profiled["profiled_steps"] == 2


def test_a_run_that_ends_inside_the_window_says_so(tmp_path):
    probe = Probe(2, 5, tmp_path / "out.pt", rank=0)
    _train(probe, 4, True)
    profiled = probe.result()
    assert "ended after 4 steps" in profiled["error"] and "steps 3 to 7" in profiled["error"]


@pytest.mark.parametrize("value", ["3", "a,b", "0,2", "2,0"])
def test_a_window_that_cannot_be_read_is_one_line(value):
    with pytest.raises(DpwiseError, match="DPWISE_SCRIPT_PROFILE"):
        parse(value)
    assert parse("2,3") == (2, 3)
