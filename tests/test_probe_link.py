"""`dpwise probe-link`: two gloo processes through the real command, and its refusals."""

import json

import pytest

from dpwise.cli import main

SCHEMA_POINT = {"bytes", "seconds", "algbw_bytes_per_s", "busbw_bytes_per_s"}


@pytest.mark.slow
def test_two_processes_probe_every_op_and_write_the_same_json(tmp_path, run_here):
    out = tmp_path / "sub" / "link.json"
    ops = "all_reduce,reduce_scatter,all_gather"
    args = ("--nproc", "2", "--device", "cpu", "--max-bytes", "64KiB", "--ops", ops)
    proc = run_here("probe-link", *args, "--json", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert json.loads(out.read_text()) == result
    assert (result["world_size"], result["backend"], result["device_type"]) == (2, "gloo", "cpu")
    assert list(result["ops"]) == ["all_reduce", "reduce_scatter", "all_gather"]
    for op, part in result["ops"].items():
        if "unsupported" in part:  # a backend without the op says why
            assert op != "all_reduce" and part["unsupported"]
            continue
        sizes = [p["bytes"] for p in part["points"]]
        assert sizes[0] == 8 and sizes[-1] == 64 * 1024 and sizes == sorted(sizes)
        for p in part["points"]:
            assert set(p) >= SCHEMA_POINT and p["seconds"] > 0
            assert p["algbw_bytes_per_s"] == pytest.approx(p["bytes"] / p["seconds"])
            # n = 2: 2(n-1)/n = 1 for all_reduce, (n-1)/n = 1/2 for the others
            factor = 1.0 if op == "all_reduce" else 0.5
            assert p["busbw_bytes_per_s"] == pytest.approx(factor * p["algbw_bytes_per_s"])
        fit = part["fit"]
        assert fit["alpha_s"] >= 0 and fit["beta_bytes_per_s"] > 0 and fit["worst_error"] >= 0
    assert len(result["hosts"]) == 2


@pytest.mark.slow
def test_the_terminal_table_and_fit(tmp_path, run_here):
    """Through the command in this process; its two processes are launched from here."""
    proc = run_here("probe-link", "--nproc", "2", "--device", "cpu", "--max-bytes", "4KiB")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("link probe: gloo between 2 processes (cpu)")
    assert any(line.split()[:3] == ["4.00", "KiB", "4096"] for line in lines)
    assert any(line.startswith("fit (ring model): α = ") and "Gbit/s" in line for line in lines)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--max-bytes", "64XB"], "--max-bytes '64XB' is not a size"),
        (["--max-bytes", "4"], "--max-bytes must be from 64 B to 16GiB, got 4 bytes"),
        (["--ops", "all_reduce,broadcast"], "--ops 'all_reduce,broadcast': unknown broadcast"),
        (["--nproc", "1"], "a link needs two ends"),
        (["--nproc", "0"], "--nproc must be at least 1, got 0"),
        (["--nnodes", "2"], "--nnodes 2 needs --rdzv-endpoint HOST:PORT"),
        (["--device", "cuda"], "--device cuda needs a CUDA GPU"),
        (["--timeout", "0"], "--timeout must be a number of seconds from 1 to"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, expected, capsys, tmp_path):
    import torch

    if torch.cuda.is_available() and "cuda" in args:
        pytest.skip("this machine has CUDA")
    out = tmp_path / "link.json"
    code = main(["probe-link", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err and "Traceback" not in err
    assert not out.exists()


def test_an_out_that_is_a_folder_is_refused(capsys, tmp_path):
    assert main(["probe-link", "--out", str(tmp_path)]) == 2
    assert "is a folder; give a file name" in capsys.readouterr().err


@pytest.mark.slow
def test_under_slurms_per_device_tasks_each_task_is_one_end_and_one_line_is_said():
    """Two SLURM tasks on one node: each is one process of the probe (nothing launched), and
    only local rank 0 prints the topology line."""
    import subprocess
    import sys

    from conftest import child_env

    job = {"SLURM_JOB_ID": "791", "SLURM_JOB_NAME": "probe", "SLURM_STEP_ID": "0",
           "SLURM_NTASKS": "2", "SLURM_NNODES": "1", "SLURM_JOB_NODELIST": "localhost",
           "SLURM_NODEID": "0"}  # fmt: skip
    tasks = [
        subprocess.Popen(
            [sys.executable, "-m", "dpwise", "probe-link", "--max-bytes", "64KiB"],
            env=child_env({**job, "SLURM_PROCID": str(i), "SLURM_LOCALID": str(i)}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for i in range(2)
    ]
    said = [task.communicate(timeout=120)[0] for task in tasks]
    assert [task.returncode for task in tasks] == [0, 0], said
    line = "SLURM job 791: node 0 of 1 (SLURM_NODEID), 2 worker(s) started by SLURM"
    assert said[0].count(line) == 1 and "link probe: gloo between 2 processes" in said[0]
    assert said[1] == ""
