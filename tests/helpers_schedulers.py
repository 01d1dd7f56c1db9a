"""Two hosts under a scheduler's environment (network namespaces, each in a UTS namespace,
resolving the other by name): the environments, their topology lines, and starting the command
on both hosts; for test_schedulers_e2e and test_schedulers_killed_host (two files, so that the
suite's processes can run them at once)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import netlab
from conftest import child_env

REASON = netlab.unavailable_reason()
# Both files' marks: skipped without namespaces, but never on CI (there it is a failure)
MARKS = [
    pytest.mark.skipif(
        REASON is not None and os.environ.get("CI") != "true", reason=f"no namespaces: {REASON}"
    ),
    pytest.mark.slow,
]
STEPS = 6
RUN_LIMIT_S = 180
TIMEOUT_S = 10  # --timeout of the killed-host runs


def slurm_per_node(net: netlab.NetPair) -> list[tuple[str, dict[str, str], list[str]]]:
    base = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "e2e", "SLURM_STEP_ID": "0",
            "SLURM_NNODES": "2", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "1",
            "SLURM_JOB_NODELIST": net.hostlist}  # fmt: skip
    return [
        (side, {**base, "SLURM_NODEID": str(i), "SLURM_PROCID": str(i), "SLURM_LOCALID": "0"},
         ["--nproc", "1"])
        for i, side in enumerate("ab")
    ]  # fmt: skip


def slurm_per_device(net: netlab.NetPair) -> list[tuple[str, dict[str, str], list[str]]]:
    base = {"SLURM_JOB_ID": "4243", "SLURM_JOB_NAME": "e2e", "SLURM_STEP_ID": "0",
            "SLURM_NNODES": "2", "SLURM_NTASKS": "4", "SLURM_STEP_TASKS_PER_NODE": "2(x2)",
            "SLURM_JOB_NODELIST": net.hostlist}  # fmt: skip
    return [
        (side, {**base, "SLURM_NODEID": str(node), "SLURM_PROCID": str(2 * node + local),
                "SLURM_LOCALID": str(local)}, [])
        for node, side in enumerate("ab") for local in range(2)
    ]  # fmt: skip


def kubeflow(net: netlab.NetPair) -> list[tuple[str, dict[str, str], list[str]]]:
    head = net.host["a"]
    base = {"PET_NNODES": "2", "PET_NPROC_PER_NODE": "1", "PET_MASTER_ADDR": head,
            "PET_MASTER_PORT": "23456", "MASTER_ADDR": head, "MASTER_PORT": "23456",
            "WORLD_SIZE": "2"}  # fmt: skip
    return [
        (side, {**base, "PET_NODE_RANK": str(i), "RANK": str(i)}, []) for i, side in enumerate("ab")
    ]


def open_mpi(net: netlab.NetPair, per_host: int = 2) -> list[tuple[str, dict[str, str], list[str]]]:
    base = {"OMPI_COMM_WORLD_SIZE": str(2 * per_host),
            "OMPI_COMM_WORLD_LOCAL_SIZE": str(per_host),
            "OMPI_MCA_ess_base_jobid": "3148480513", "MASTER_ADDR": net.host["a"]}  # fmt: skip
    return [
        (side, {**base, "OMPI_COMM_WORLD_RANK": str(per_host * node + local),
                "OMPI_COMM_WORLD_LOCAL_RANK": str(local)}, [])
        for node, side in enumerate("ab") for local in range(per_host)
    ]  # fmt: skip


def open_mpi_one_per_host(net: netlab.NetPair) -> list[tuple[str, dict[str, str], list[str]]]:
    """Open MPI's variables with one task per host: every worker is still one the scheduler
    started (the mode a killed host's test needs), with half the processes to start."""
    return open_mpi(net, per_host=1)


def topology_lines(net: netlab.NetPair) -> dict[str, dict[str, str]]:
    """The topology line each environment's hosts print (their node-0 process)."""
    a, lst = net.host["a"], "first host of SLURM_JOB_NODELIST, port from the job id"
    per_dev = "2 worker(s) started by {by}, one per device ({src}); this is rank {r} of 4"
    return {
        "slurm_per_node": {
            s: f"SLURM job 4242: node {i} of 2 (SLURM_NODEID), 1 worker(s) (--nproc), "
            f"rendezvous {a}:19242 ({lst})"
            for i, s in enumerate("ab")
        },
        "slurm_per_device": {
            s: f"SLURM job 4243: node {i} of 2 (SLURM_NODEID), "
            + per_dev.format(by="SLURM", src="SLURM_STEP_TASKS_PER_NODE", r=2 * i)
            + f" (SLURM_PROCID), rendezvous {a}:19243 ({lst})"
            for i, s in enumerate("ab")
        },
        "kubeflow": {
            s: f"Kubeflow PyTorchJob: node {i} of 2 (PET_NODE_RANK), 1 worker(s) "
            f"(PET_NPROC_PER_NODE), rendezvous {a}:23456 (PET_MASTER_ADDR, PET_MASTER_PORT)"
            for i, s in enumerate("ab")
        },
        "open_mpi": {
            s: f"Open MPI job 3148480513: node {i} of 2 (OMPI_COMM_WORLD_RANK ÷ "
            "OMPI_COMM_WORLD_LOCAL_SIZE), "
            + per_dev.format(by="MPI", src="OMPI_COMM_WORLD_LOCAL_SIZE", r=2 * i)
            + f" (OMPI_COMM_WORLD_RANK), rendezvous {a}:15513 (MASTER_ADDR, already set, "
            "port from the MPI job id)"
            for i, s in enumerate("ab")
        },
    }


ENVIRONMENTS = {
    "slurm_per_node": slurm_per_node,
    "slurm_per_device": slurm_per_device,
    "kubeflow": kubeflow,
    "open_mpi": open_mpi,
}
# for test_schedulers_killed_host only (the topology lines of two tasks per host are the e2e's)
ONE_PER_HOST = {"open_mpi_one_per_host": open_mpi_one_per_host}


class Output:
    """A process's merged output, read as it comes."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def text(self) -> str:
        self._thread.join(timeout=10)
        return "\n".join(self.lines)


def start_on_both(
    net: netlab.NetPair, name: str, out: Path, extra: list[str]
) -> list[tuple[str, Output]]:
    started = []
    for side, env, flags in {**ENVIRONMENTS, **ONE_PER_HOST}[name](net):
        argv = [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--out", str(out),
                *flags, *extra]  # fmt: skip
        proc = net.popen(side, argv, env=child_env(env), stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)  # fmt: skip
        started.append((side, Output(proc)))
    return started


def left_in(net: netlab.NetPair, side: str) -> list[str]:
    """Processes still running in a host's namespace."""
    return netlab._ip("netns", "pids", net.ns[side], check=False).stdout.split()
