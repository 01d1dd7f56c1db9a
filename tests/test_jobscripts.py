"""The jobs advise and migrate write for a scheduler: complete, parseable, the pattern dpwise
expects (one task per node), never over an existing file."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from dpwise.cli import main
from dpwise.launch.cluster.topology import resolve

ADVISE = ["advise", "--gpus", "8", "--nodes", "2", "--params", "1B"]


def _bash_syntax(path):
    done = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_advise_writes_an_sbatch_script_with_one_task_per_node(tmp_path, capsys):
    job = tmp_path / "job.sbatch"
    assert main([*ADVISE, "--scheduler", "slurm", "--job-out", str(job)]) == 0
    said = capsys.readouterr().out
    assert f"job: wrote {job} (SLURM, 2 node(s) × 8 GPU(s), one task per node)" in said
    assert f"submit: sbatch {job}" in said
    text = job.read_text()
    _bash_syntax(job)
    for line in (
        "#SBATCH --nodes=2 ",
        "#SBATCH --ntasks-per-node=1 ",
        "#SBATCH --gpus-per-node=8 ",
    ):
        assert line in text
    assert "# export NCCL_SOCKET_IFNAME=" in text and "# export GLOO_SOCKET_IFNAME=" in text
    srun = [line for line in text.splitlines() if line.startswith("srun ")]
    assert srun == [
        "srun --kill-on-bad-exit=1 dpwise train --strategy ddp --model PKG.MODULE:MODEL_FACTORY "
        "--data PKG.MODULE:DATA_FACTORY --out runs/ddp"
    ]  # the launch flags are SLURM's: no --nnodes, --rdzv-endpoint or --nproc
    sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
    assert all("#" in line[1:] for line in sbatch)  # a comment on every directive


def test_the_sbatch_line_resolves_to_one_launch_per_node_under_slurm():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NAME": "dpwise-ddp", "SLURM_STEP_ID": "0",
           "SLURM_NNODES": "2", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n[1-2]",
           "SLURM_NODEID": "1", "SLURM_PROCID": "1", "SLURM_LOCALID": "0"}  # fmt: skip
    topo = resolve({}, env)  # what `srun --ntasks-per-node=1 dpwise train` finds on node 1
    assert topo.mode == "launch" and topo.settings()["rdzv_endpoint"] == "n1:15007"


def test_advise_writes_a_pytorchjob_dpwise_reads(tmp_path, capsys):
    job = tmp_path / "pj.yaml"
    assert main([*ADVISE, "--scheduler", "kubernetes", "--job-out", str(job), "--json"]) == 0
    assert '"scheduler": "kubernetes"' in capsys.readouterr().out
    manifest = yaml.safe_load(job.read_text())
    assert manifest["kind"] == "PyTorchJob" and manifest["apiVersion"] == "kubeflow.org/v1"
    spec = manifest["spec"]
    assert spec["nprocPerNode"] == "8" and spec["elasticPolicy"]["rdzvBackend"] == "c10d"
    assert spec["elasticPolicy"]["minReplicas"] == spec["elasticPolicy"]["maxReplicas"] == 2
    worker = spec["pytorchReplicaSpecs"]["Worker"]
    container = worker["template"]["spec"]["containers"][0]
    assert worker["replicas"] == 2 and container["name"] == "pytorch"
    assert container["command"][:2] == ["dpwise", "train"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 8
    # what the operator then gives each pod, read by dpwise as one launch per pod
    pod = {"PET_NNODES": "2:2", "PET_NPROC_PER_NODE": "8", "PET_RDZV_BACKEND": "c10d",
           "PET_RDZV_ENDPOINT": "dpwise-x-worker-0:29400"}  # fmt: skip
    assert resolve({}, pod).settings()["nproc"] == 8


def test_torchrun_job_is_a_line_per_node(tmp_path, capsys):
    job = tmp_path / "run.sh"
    assert main([*ADVISE, "--scheduler", "torchrun", "--job-out", str(job)]) == 0
    _bash_syntax(job)
    text = job.read_text()
    assert '--rdzv-endpoint "$NODE0:29400"' in text and "--nnodes 2" in text


def test_an_existing_job_file_is_never_overwritten(tmp_path, capsys):
    job = tmp_path / "job.sbatch"
    job.write_text("mine\n")
    assert main([*ADVISE, "--scheduler", "slurm", "--job-out", str(job)]) == 2
    assert job.read_text() == "mine\n"
    err = capsys.readouterr().err.strip()
    assert err == f"dpwise: error: --job-out {job} exists: give another path, or remove it first"
    assert main(["advise", "--job-out", str(tmp_path / "x")]) == 2
    assert "give --scheduler too" in capsys.readouterr().err


@pytest.mark.parametrize("scheduler", ["slurm", "kubernetes", "torchrun"])
def test_migrate_writes_the_job_that_runs_the_migrated_script(tmp_path, capsys, scheduler):
    from conftest import FIXTURES_MIGRATE

    script = next(FIXTURES_MIGRATE.glob("*.py"))
    out, job = tmp_path / "train_ddp.py", tmp_path / "job"
    argv = ["migrate", str(script), "-o", str(out), "--scheduler", scheduler, "--job-out",
            str(job), "--nodes", "2", "--gpus", "4", "--script-args", "--epochs 3"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    text = job.read_text()
    assert f"{out}" in text and "--epochs" in text
    if scheduler == "kubernetes":
        command = yaml.safe_load(text)["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
        assert command["spec"]["containers"][0]["command"] == [
            "torchrun",
            str(out),
            "--epochs",
            "3",
        ]
    else:
        _bash_syntax(job)
        assert "--nproc-per-node 4" in text


def test_migrate_scheduler_needs_the_migrated_file(tmp_path, capsys):
    from conftest import FIXTURES_MIGRATE

    script = next(FIXTURES_MIGRATE.glob("*.py"))
    assert main(["migrate", str(script), "--scheduler", "slurm"]) == 2
    assert "give -o FILE" in capsys.readouterr().err
    assert not (tmp_path / "job.sbatch").exists()
