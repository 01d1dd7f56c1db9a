"""Under a scheduler's environment, on two hosts with their own names (network namespaces, each
in a UTS namespace, resolving the other by name): SLURM one task per node, SLURM one task per
device (two tasks per host), a Kubeflow PyTorchJob's PET_* variables and Open MPI's. Each trains
ddp to within 1e-5 of single, prints the right topology line on both hosts and leaves no process.
A killed host: test_schedulers_killed_host."""

from __future__ import annotations

import pytest

import netlab
from conftest import load_state, max_abs_diff
from helpers_schedulers import (
    ENVIRONMENTS,
    MARKS,
    REASON,
    RUN_LIMIT_S,
    STEPS,
    left_in,
    start_on_both,
    topology_lines,
)
from helpers_train import train_here

pytestmark = MARKS


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """What one process trains in STEPS steps: every environment's ddp must end there."""
    return train_here(tmp_path_factory.mktemp("single"), epochs=1, max_steps=STEPS)[0]


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_each_scheduler_trains_ddp_across_two_hosts_like_one_process(tmp_path, name, single):
    assert REASON is None, REASON
    with netlab.NetPair(named=True) as net:
        run = ["--epochs", "1", "--max-steps", str(STEPS), "--timeout", "60"]
        started = start_on_both(net, name, tmp_path / "mn", run)
        for _, output in started:
            output.proc.wait(timeout=RUN_LIMIT_S)
        said = {side: [] for side in "ab"}
        for side, output in started:
            assert output.proc.returncode == 0, output.text()
            said[side].append(output.text())
        for side, line in topology_lines(net)[name].items():
            assert line in "\n".join(said[side]).splitlines(), (line, said[side])
            assert "\n".join(said[side]).count(" of 2 (") == 1  # one line per node
            assert left_in(net, side) == []
    assert max_abs_diff(single, load_state(tmp_path / "mn" / "final.pt")) <= 1e-5
