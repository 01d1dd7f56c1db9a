"""Multi-node options reach the elastic launcher; two 'nodes' on loopback train as one job."""

import json
import subprocess
import sys

import pytest

from conftest import child_env, free_port, load_state, max_abs_diff
from dpwise.infra.hardware import Hardware
from dpwise.launch.elastic import launch_config
from dpwise.launch.env import DistEnv
from dpwise.train.config import TrainConfig
from dpwise.train.plan import resolve
from helpers_train import train_here

CPU = Hardware(cuda_devices=0, cpu_cores=2)
STEPS = 10  # enough to prove two nodes train as one process; an epoch adds nothing to that


def test_multi_node_options_pass_through_to_the_launcher():
    cfg = TrainConfig(
        strategy="ddp", nproc=4, nnodes=3, rdzv_endpoint="head:29400", max_restarts=2,
        rdzv_id="job7", batch_size=12,
    )  # fmt: skip
    lc = launch_config(resolve(cfg, CPU, DistEnv()).launch_settings)
    assert (lc.min_nodes, lc.max_nodes, lc.nproc_per_node) == (3, 3, 4)
    assert (lc.rdzv_backend, lc.rdzv_endpoint, lc.run_id) == ("c10d", "head:29400", "job7")
    assert lc.max_restarts == 2 and "rank" not in lc.rdzv_configs  # c10d assigns node ranks
    static = TrainConfig(
        strategy="ddp", nproc=2, nnodes=2, node_rank=1, rdzv_endpoint="head:29400",
        rdzv_backend="static",
    )  # fmt: skip
    assert launch_config(resolve(static, CPU, DistEnv()).launch_settings).rdzv_configs["rank"] == 1


def test_single_node_gets_a_free_loopback_port_and_a_fresh_id():
    plan = resolve(TrainConfig(strategy="ddp"), CPU, DistEnv())
    a, b = launch_config(plan.launch_settings), launch_config(plan.launch_settings)
    assert a.rdzv_endpoint == "localhost:0" and a.run_id != b.run_id


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The one-process run both strategies' two nodes must end at (made once)."""
    state, _ = train_here(tmp_path_factory.mktemp("single"), epochs=1, max_steps=STEPS)
    return state


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_nodes_on_loopback_train_like_one_process(tmp_path, strategy, single, run_here):
    """One node a fresh `python -m dpwise` (a user's shell), the other in this process (a
    second fresh interpreter would import torch again, and start a fork server of its own, to
    prove nothing more: the two still meet only through the rendezvous endpoint)."""
    args = ["train", "--strategy", strategy, "--nproc", "1", "--nnodes", "2",
            "--rdzv-endpoint", f"localhost:{free_port()}", "--threads", "1", "--epochs", "1",
            "--max-steps", str(STEPS), "--quiet", "--out", str(tmp_path / "mn")]  # fmt: skip
    other = subprocess.Popen(
        [sys.executable, "-m", "dpwise", *args], env=child_env(), stderr=subprocess.PIPE, text=True
    )
    try:
        here = run_here(*args)
        _, err = other.communicate(timeout=240)
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()
    assert here.returncode == 0, here.stderr
    assert other.returncode == 0, err
    assert max_abs_diff(single, load_state(tmp_path / "mn" / "final.pt")) <= 1e-5
    workers = json.loads((tmp_path / "mn" / "metrics.json").read_text())["workers"]
    assert len(workers) == 2 and len({w["pid"] for w in workers}) == 2
