"""Parameters without gradient under DDP: one line naming them, the flags, compare's handling."""

import json

import pytest
import torch
import torch.distributed as dist
from torch import nn

from dpwise.errors import DpwiseError
from dpwise.launch.env import DistEnv
from dpwise.strategies.ddp import DDPStrategy
from dpwise.train.config import TrainConfig

SKIP = ["--model", "randomlayers:skip_model", "--data", "userpkg:tiny_data", "--batch-size", "8"]


@pytest.fixture
def one_process_group():
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def _steps(model: nn.Module, steps: int = 6) -> None:
    torch.manual_seed(0)  # RandomSkip skips its block in some of these steps
    for _ in range(steps):
        model(torch.randn(8, 4)).sum().backward()


def test_ddp_names_the_modules_that_got_no_gradient_and_the_flag(userpkg, one_process_group):
    import randomlayers

    model = DDPStrategy(DistEnv(), "gloo", "cpu").wrap(randomlayers.skip_model())
    with pytest.raises(DpwiseError) as caught:
        _steps(model)
    message = str(caught.value)
    assert "1 RandomSkip layer: 1 got no gradient" in message
    assert "--find-unused-parameters" in message and "\n" not in message


def test_find_unused_parameters_reaches_ddp(userpkg, one_process_group):
    import randomlayers

    options = {"find_unused_parameters": True}
    model = DDPStrategy(DistEnv(), "gloo", "cpu", options=options).wrap(randomlayers.skip_model())
    assert model.find_unused_parameters
    _steps(model)  # no error


@pytest.mark.parametrize("flag", ["find_unused_parameters", "static_graph"])
def test_the_ddp_flags_need_the_ddp_strategy(flag):
    with pytest.raises(DpwiseError, match=f"--{flag.replace('_', '-')} .* needs --strategy ddp"):
        TrainConfig(strategy="single", **{flag: True})
    assert TrainConfig(strategy="ddp", **{flag: True}).ddp_options[flag] is True


def test_static_graph_is_refused_up_front_when_the_used_parameters_change(run_here, tmp_path):
    out = ["--out", str(tmp_path / "out")]
    proc = run_here("train", *SKIP, "--strategy", "ddp", "--nproc", "2", "--static-graph", *out)
    assert proc.returncode == 2
    assert "--static-graph: the parameters of 1 RandomSkip layer: 1" in proc.stderr
    assert "--find-unused-parameters" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_train_ddp_without_the_flag_stops_with_one_line_and_with_it_trains(tmp_path, run_here):
    base = ["train", *SKIP, "--strategy", "ddp", "--nproc", "2", "--epochs", "1"]
    failed = run_here(*base)
    assert failed.returncode == 2, failed.stderr
    assert "Traceback" not in failed.stderr
    lines = [line for line in failed.stderr.splitlines() if line.startswith("dpwise")]
    assert len(lines) == 1 and "1 RandomSkip layer: 1 got no gradient" in lines[0]
    assert "--find-unused-parameters" in lines[0]
    trained = run_here(*base, "--find-unused-parameters", "--out", str(tmp_path))
    assert trained.returncode == 0, trained.stderr
    assert (tmp_path / "final.pt").is_file()


@pytest.mark.slow
def test_compare_runs_ddp_with_find_unused_parameters_and_names_the_randomness(tmp_path, run_here):
    proc = run_here(
        "compare", *SKIP, "--epochs", "2", "--repeats", "1", "--profile-steps", "1",
        "--out", str(tmp_path), "--quiet",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # convergence fails: the model is random
    results = json.loads((tmp_path / "results.json").read_text())
    options = {r["id"]: r.get("ddp_options") for r in results["runs"]}
    assert options["ddp-2"] == {"find_unused_parameters": True}
    assert options["single"] is None
    assert results["diagnosis"]["unused_parameters"]["sometimes"] == [
        {"name": "1", "kind": "RandomSkip"}
    ]
    check = next(c for c in results["checks"] if c["name"] == "convergence")
    assert check["status"] == "fail"
    assert "1 RandomSkip layer: 1; 1 Jitter layer: 2" in check["explanation"]
    assert "passed find_unused_parameters=True" in check["explanation"]
    assert "random layers" in " ".join(results["recommendation"]["reasons"])


def test_compare_can_be_told_to_find_unused_parameters():
    """For a block skipped so rarely that the model probe never sees it go unused."""
    from dpwise.cli import build_parser
    from dpwise.commands.compare import compare_config

    args = build_parser().parse_args(["compare", "--find-unused-parameters"])
    cfg = compare_config(args)
    assert cfg.train_config("ddp", 2).find_unused_parameters
    assert not cfg.train_config("single", None).find_unused_parameters
