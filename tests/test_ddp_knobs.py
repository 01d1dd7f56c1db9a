"""The knobs of ddp and fsdp that `dpwise train` takes (what `dpwise tune` will choose among):
the lossless ones train single's model, the compression hooks drift a little and say so by
their numbers, and a knob the strategy or the backend lacks is one line before anything runs."""

from __future__ import annotations

import json

import pytest

from conftest import load_state, max_abs_diff
from dpwise.cli import main
from helpers_train import train_here

STEPS = 10
RUN = ("--epochs", "1", "--max-steps", str(STEPS), "--quiet", "--threads", "1")


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    return train_here(tmp_path_factory.mktemp("single"), epochs=1, max_steps=STEPS)[0]


@pytest.fixture
def train(run_here):
    """`dpwise train RUN FLAGS` in this process (what the knobs do to the model is the claim,
    not what a fresh process does): its final parameters and its metrics."""

    def run(out, *flags):
        proc = run_here("train", *RUN, "--out", str(out), *flags)
        assert proc.returncode == 0, proc.stderr
        return load_state(out / "final.pt"), json.loads((out / "metrics.json").read_text())

    return run


@pytest.mark.slow
def test_lossless_ddp_knobs_train_singles_model(tmp_path, single, train):
    flags = ("--strategy", "ddp", "--nproc", "2", "--bucket-cap-mb", "0.01",
             "--gradient-as-bucket-view", "--static-graph")  # fmt: skip
    state, metrics = train(tmp_path / "ddp", *flags)
    assert max_abs_diff(single, state) <= 1e-5
    config = metrics["config"]
    assert (config["bucket_cap_mb"], config["gradient_as_bucket_view"]) == (0.01, True)


@pytest.mark.slow
@pytest.mark.parametrize("hook", ["fp16", "powersgd"])
def test_compression_hooks_drift_from_single_but_train(tmp_path, single, hook, train):
    state, metrics = train(
        tmp_path / hook, "--strategy", "ddp", "--nproc", "2", "--comm-hook", hook
    )
    drift = max_abs_diff(single, state)
    assert 0 < drift <= 1e-2, drift  # lossy (not single's model), yet the same training
    assert metrics["config"]["comm_hook"] == hook


# fsdp's knobs on the transformer: a step of it is about a second of a busy core, and a knob that
# broke the sharded gradients would part from single's model at the first step.
FSDP = ("--strategy", "fsdp", "--nproc", "2", "--model", "transformer", "--max-steps", "4")


@pytest.fixture(scope="module")
def single_transformer(tmp_path_factory):
    out = tmp_path_factory.mktemp("single-transformer")
    return train_here(out, epochs=1, max_steps=4, model="transformer")[0]


@pytest.mark.slow
def test_fsdp_without_resharding_trains_singles_model(tmp_path, single_transformer, train):
    state, _ = train(tmp_path / "fsdp", *FSDP, "--no-reshard-after-forward")
    assert max_abs_diff(single_transformer, state) <= 1e-5


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--strategy", "ddp", "--comm-hook", "bf16"], "--comm-hook bf16 needs NCCL"),
        (["--comm-hook", "fp16"], "--comm-hook is an option of --strategy ddp"),
        (["--strategy", "ddp", "--no-reshard-after-forward"], "an option of --strategy fsdp"),
        (["--strategy", "ddp", "--bucket-cap-mb", "0"], "--bucket-cap-mb must be a size in MB"),
        (["--strategy", "ddp", "--bucket-cap-mb", "nan"], "--bucket-cap-mb must be a size in MB"),
        (["--strategy", "ddp", "--comm-hook", "int8"], "argument --comm-hook: invalid choice"),
    ],
)
def test_a_knob_the_strategy_or_backend_lacks_is_one_line(tmp_path, capsys, argv, said):
    out = tmp_path / "out"
    assert main(["train", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert said in err and "\n" not in err
    assert not out.exists()


def test_the_knobs_reach_distributed_data_parallel(monkeypatch):
    """A one-process gloo group: the wrapped model carries what the flags asked for."""
    import torch.distributed as dist
    from torch import nn

    from conftest import free_port
    from dpwise.launch.env import DistEnv
    from dpwise.strategies.ddp import DDPStrategy

    for name, value in (("MASTER_ADDR", "127.0.0.1"), ("MASTER_PORT", str(free_port())),
                        ("RANK", "0"), ("WORLD_SIZE", "1")):  # fmt: skip
        monkeypatch.setenv(name, value)
    options = {"bucket_cap_mb": 0.5, "gradient_as_bucket_view": True, "comm_hook": "fp16",
               "static_graph": False, "find_unused_parameters": False}  # fmt: skip
    strategy = DDPStrategy(DistEnv(world_size=1), "gloo", "cpu", options=options)
    strategy.setup()
    try:
        wrapped = strategy.wrap(nn.Linear(4, 2))
        assert wrapped.bucket_bytes_cap == int(0.5 * 1024 * 1024)
        assert wrapped.gradient_as_bucket_view is True
        assert wrapped._get_ddp_logging_data().get("comm_hook") == "fp16_compress_hook"
    finally:
        strategy.teardown()
        assert not dist.is_initialized()


@pytest.mark.slow
def test_zero1_is_ddps_model_and_resumes_exactly(tmp_path, train):
    ddp = ("--strategy", "ddp", "--nproc", "2", "--optimizer", "adamw", "--max-steps", "6")
    plain, _ = train(tmp_path / "ddp", *ddp)
    sharded, metrics = train(tmp_path / "zero1", *ddp, "--zero1", "--checkpoint-every", "3")
    assert max_abs_diff(plain, sharded) == 0.0 and metrics["config"]["zero1"] is True
    # ZeRO-1's state is spread over the workers: the checkpoint gathers it, a resume goes on
    half = tmp_path / "half"
    train(half, *ddp, "--zero1", "--checkpoint-every", "3", "--max-steps", "3")
    resumed, _ = train(half, *ddp, "--zero1", "--checkpoint-every", "3", "--resume")
    assert max_abs_diff(sharded, resumed) == 0.0


@pytest.mark.slow
def test_fsdp_with_the_whole_model_as_one_unit_trains_singles_model(
    tmp_path, single_transformer, train
):
    state, metrics = train(tmp_path / "fsdp", *FSDP, "--shard-units", "model")
    assert max_abs_diff(single_transformer, state) <= 1e-5
    assert metrics["notes"] == ["fsdp shards 1 unit(s): (root)"]


def test_fsdps_options_reach_the_strategy():
    from dpwise.launch.env import DistEnv
    from dpwise.strategies.base import StrategySpec
    from dpwise.strategies.fsdp import FSDPStrategy

    options = {"reshard_after_forward": False, "shard_units": "model"}
    spec = StrategySpec(name="fsdp", device_type="cpu", backend="gloo", options=options)
    assert FSDPStrategy.from_spec(spec, DistEnv()).settings == dict(spec.options)


SIZES = ("n_layer=2", "n_embd=128", "n_head=2", "vocab_size=2000")
GPT2 = ("--model", "transformers:gpt2", "--batch-size", "16",
        *(arg for size in SIZES for arg in ("--model-arg", size)))  # fmt: skip


@pytest.mark.slow
def test_powersgd_on_gloo_keeps_every_gradient_in_one_bucket(tmp_path, train):
    """With DDP's buckets (the first is 1 MB) GPT-2's gradients take several, and PowerSGD's
    second all-reduce, started from a callback, raced the next bucket's: gloo aborted with
    "Received data size doesn't match expected size" in every run. One bucket trains."""
    _, metrics = train(tmp_path / "psgd", *GPT2, "--strategy", "ddp", "--nproc", "2",
                       "--comm-hook", "powersgd", "--max-steps", "3")  # fmt: skip
    assert metrics["config"]["comm_hook"] == "powersgd"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        ([*GPT2, "--comm-hook", "powersgd", "--bucket-cap-mb", "0.5"],
         "--comm-hook powersgd on gloo needs every gradient in one bucket"),
        (["--model", "trapmodels:sparse_model", "--comm-hook", "fp16"],
         "give sparse gradients, which DDP's communication hooks cannot compress"),
    ],
)  # fmt: skip
def test_hooks_the_model_cannot_take_are_one_line_before_any_worker(tmp_path, run_here, argv, said):
    out = tmp_path / "out"
    proc = run_here("train", "--strategy", "ddp", "--nproc", "2", *argv, "--out", str(out))
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert proc.stderr.strip().count("\n") <= 1 and not out.exists()  # the data line, the error
