"""Under a scheduler's environment on two hosts (helpers_schedulers): a killed host ends the
other within --timeout with one line. Two environments where dpwise's launcher runs on each host
(SLURM one task per node; Kubeflow's PET_* variables) and one where the scheduler starts every
worker (Open MPI's, one task per host: a worker per device ends the same however many share its
host, and half the processes start; two per host, and SLURM's tasks per device, train across two
hosts in test_schedulers_e2e): a second of that kind would prove the same ending again."""

from __future__ import annotations

import os
import time

import pytest

import netlab
from helpers_schedulers import MARKS, REASON, RUN_LIMIT_S, TIMEOUT_S, left_in, start_on_both

pytestmark = MARKS


@pytest.mark.parametrize("name", ["kubeflow", "open_mpi_one_per_host", "slurm_per_node"])
def test_a_killed_host_ends_the_other_within_the_timeout(tmp_path, name):
    assert REASON is None, REASON
    with netlab.NetPair(named=True) as net:
        # short epochs (2 steps): the first epoch's line comes soon, then the kill
        run = ["--epochs", "10000", "--data-arg", "samples=512", "--timeout", str(TIMEOUT_S)]
        started = start_on_both(net, name, tmp_path / "mn", run)
        deadline = time.monotonic() + RUN_LIMIT_S
        while not any(line.startswith("epoch 1/") for _, o in started for line in o.lines):
            assert time.monotonic() < deadline, [o.text() for _, o in started]
            assert all(o.proc.poll() is None for _, o in started), [o.text() for _, o in started]
            time.sleep(0.2)
        for pid in left_in(net, "b"):  # the whole host goes: every process in it, SIGKILL
            os.kill(int(pid), 9)
        killed = time.monotonic()
        for side, output in started:
            if side == "a":
                output.proc.wait(timeout=TIMEOUT_S + 30)
        took = time.monotonic() - killed
        for side, output in started:
            if side != "a":
                continue
            text = output.text()
            assert output.proc.returncode not in (0, None), text
            last = text.strip().splitlines()[-1]
            assert last.startswith("dpwise: "), text
            assert "Traceback" not in text, text
        assert took <= TIMEOUT_S + 15, took
        assert left_in(net, "a") == []
