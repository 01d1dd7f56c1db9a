"""fsdp (FSDP2 fully_shard): the equivalence contract, gathered checkpoints, its sync switch, and
its one-line refusals."""

import json

import pytest
import torch

from conftest import free_port, load_state, max_abs_diff, run_cli, run_module
from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies.fsdp import ROOT, FSDPStrategy, shard_units, unit_names
from dpwise.train.config import TrainConfig
from dpwise.train.engine import train
from dpwise.train.plan import resolve
from dpwise.workload.models import SimpleModel, TinyTransformer
from dpwise.workload.spec import resolve_workload
from helpers_train import train_here

FSDP2 = ["train", "--strategy", "fsdp", "--nproc", "2", "--quiet"]


@pytest.fixture
def fsdp_run(run_here):
    """`dpwise train ARGS` in this process (its workers launched from here), which must succeed:
    for the runs that are about what training computes; fresh processes: `run_cli`."""

    def run(*args: str) -> None:
        proc = run_here(*args)
        assert proc.returncode == 0, proc.stderr

    return run


# -- which submodules are sharded ---------------------------------------------------------------
def test_units_are_the_repeated_blocks_or_else_each_child_with_parameters():
    assert unit_names(TinyTransformer(layers=3)) == [
        "encoder.layers.0",
        "encoder.layers.1",
        "encoder.layers.2",
        ROOT,  # embedding, positions, final norm and head
    ]
    assert unit_names(SimpleModel()) == ["fc1", "fc2", ROOT]
    nested = torch.nn.Sequential(
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)),
        torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU()),
    )
    # outermost first, never a block inside a block
    assert [n for n, _ in shard_units(nested)] == ["0", "1"]
    deep = torch.nn.Module()
    deep.body = nested
    deep.head = torch.nn.Linear(2, 2)
    assert unit_names(deep) == ["body.0", "body.1", ROOT]


# -- the equivalence contract -------------------------------------------------------------------
FRESH = ["train", "--strategy", "fsdp", "--epochs", "1", "--max-steps", "10"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """`dpwise train --strategy fsdp --nproc 2` on 10 steps of the default workload, in a fresh
    process: what its workers print is the claim too, and a fork server an earlier test started
    in this process would print it elsewhere. Its folder and process; read, never written."""
    out = tmp_path_factory.mktemp("fsdp") / "fsdp"
    proc = run_cli(*FRESH, "--nproc", "2", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    return out, proc


@pytest.mark.slow
def test_fsdp_ends_with_singles_parameters_on_the_default_workload(tmp_path, fresh):
    # 10 steps of it (across epochs: test_equivalence)
    single, _ = train_here(tmp_path / "single", epochs=1, max_steps=10)
    folder, proc = fresh
    final = load_state(folder / "final.pt")  # weights_only=True
    assert list(final) == list(single)  # the plain model's names, in its order
    assert max_abs_diff(single, final) <= 1e-5
    assert all(type(t) is torch.Tensor and t.device.type == "cpu" for t in final.values())
    SimpleModel().load_state_dict(final)  # strict: the full, unsharded, unwrapped model
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["strategy"] == "fsdp" and metrics["world_size"] == 2
    assert metrics["sharded_units"] == ["fc1", "fc2", ROOT]
    assert "note: fsdp shards 3 unit(s): fc1, fc2, (root)" in proc.stdout


@pytest.mark.slow
def test_fsdp_with_accumulation_equals_single_with_a_larger_batch_on_the_transformer(
    tmp_path, fsdp_run
):
    # an eighth of its data: 2 steps of 2 micro-steps each
    model = ["--model", "transformer", "--epochs", "1", "--data-arg", "samples=256"]
    single, _ = train_here(
        tmp_path / "single", model="transformer", epochs=1, batch_size=128, momentum=0.9,
        data_args={"samples": 256},
    )  # fmt: skip
    fsdp_run(*FSDP2, *model, "--batch-size", "64", "--accum-steps", "2", "--momentum", "0.9",
           "--out", str(tmp_path / "fsdp"))  # fmt: skip
    final = load_state(tmp_path / "fsdp" / "final.pt")
    assert max_abs_diff(single, final) <= 1e-5
    units = json.loads((tmp_path / "fsdp" / "metrics.json").read_text())["sharded_units"]
    assert units == ["encoder.layers.0", "encoder.layers.1", ROOT]


@pytest.mark.slow
def test_fsdp_resumes_mid_epoch_as_if_never_stopped(tmp_path, fsdp_run):
    # the default model on a quarter of its data: 10 steps an epoch, cut at 6
    base = [*FSDP2, "--optimizer", "adamw", "--epochs", "2", "--data-arg", "samples=2560"]
    fsdp_run(*base, "--out", str(tmp_path / "whole"))
    fsdp_run(*base, "--max-steps", "6", "--checkpoint-every", "6", "--out", str(tmp_path / "cut"))
    checkpoint = load_state(tmp_path / "cut" / "checkpoint.pt")
    # gathered, in the plain optimizer's layout: any strategy can resume it
    assert sorted(checkpoint["optimizer"]["state"]) == [0, 1, 2, 3]
    assert checkpoint["optimizer"]["state"][0]["exp_avg"].shape == (512, 1000)
    fsdp_run(*base, "--resume", "--out", str(tmp_path / "cut"))
    diff = max_abs_diff(
        load_state(tmp_path / "whole" / "final.pt"), load_state(tmp_path / "cut" / "final.pt")
    )
    assert diff <= 1e-6
    metrics = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert metrics["resumed_at_step"] == 6 and metrics["global_steps"] == 2 * 10


@pytest.mark.slow
def test_under_torchrun_fsdp_is_the_same_run(tmp_path, fresh):
    """torchrun's two workers, each `python -m dpwise train`, end where dpwise's own launch of
    the same run (the fixture) ends."""
    proc = run_module(
        "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "dpwise", *FRESH,
        "--quiet", "--out", str(tmp_path / "torchrun"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    diff = max_abs_diff(
        load_state(fresh[0] / "final.pt"), load_state(tmp_path / "torchrun" / "final.pt")
    )
    assert diff <= 1e-6
    workers = json.loads((tmp_path / "torchrun" / "metrics.json").read_text())["workers"]
    assert [w["rank"] for w in workers] == [0, 1]


# -- FSDP2's own switch for accumulation --------------------------------------------------------
def test_non_final_micro_steps_turn_fsdps_gradient_sync_off(monkeypatch):
    """The loop's no_sync is FSDP2's set_requires_gradient_sync(False), back on for the last."""
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(free_port()))
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    switched: list[bool] = []

    class Recording(FSDPStrategy):
        def wrap(self, model):
            wrapped = super().wrap(model)
            real = wrapped.set_requires_gradient_sync
            wrapped.set_requires_gradient_sync = lambda on, **kw: (switched.append(on), real(on))
            return wrapped

    cfg = TrainConfig(strategy="ddp", nproc=1, batch_size=32, accum_steps=4, max_steps=2,
                      data_args={"samples": 512})  # fmt: skip
    env = DistEnv(world_size=1)  # a one-member group: the switch, not the sharding, is tested
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=2), env)
    strategy = Recording(env, "gloo", "cpu")
    result = train(plan, strategy, resolve_workload("simple", {}, None, cfg.data_args)).result
    assert result.global_steps == 2
    assert switched == [False, True] * 3 * 2  # off and on again around micro-steps 1-3 of 4


# -- bad input: one line, exit 2 ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--nproc", "1"], "--strategy fsdp needs at least 2 processes, this run has 1"),
        (["--nproc", "3"], "--batch-size 256 is not divisible by world size 3"),
        (["--nproc", "2", "--model", "userpkg:no_parameters"], "no trainable parameters"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, message, tmp_path, run_here):
    """Through the command in this process (a fresh process's one line: faults/test_bad_inputs)."""
    proc = run_here("train", "--strategy", "fsdp", *args, "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not (tmp_path / "out").exists()
