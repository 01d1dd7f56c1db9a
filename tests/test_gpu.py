"""CUDA paths (NCCL, DataParallel over device_ids, per-device memory). Skipped without GPUs."""

import json

import pytest
import torch

from conftest import load_state, max_abs_diff, run_cli

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]


def test_single_dp_ddp_agree_on_cuda(tmp_path):
    gpus = torch.cuda.device_count()
    nproc = min(gpus, 2)
    runs = {
        "single": ["--strategy", "single"],
        "dp": ["--strategy", "dp"],
        "ddp": ["--strategy", "ddp", "--nproc", str(nproc)],
    }
    for name, args in runs.items():
        proc = run_cli("train", *args, "--epochs", "2", "--quiet", "--out", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
    single = load_state(tmp_path / "single" / "final.pt")
    for name in ("dp", "ddp"):
        assert max_abs_diff(single, load_state(tmp_path / name / "final.pt")) <= 1e-4
    metrics = json.loads((tmp_path / "ddp" / "metrics.json").read_text())
    assert metrics["backend"] == "nccl"
    assert {m["kind"] for m in metrics["peak_memory"]} == {"cuda_max_memory_allocated"}
    dp = json.loads((tmp_path / "dp" / "metrics.json").read_text())
    assert len(dp["peak_memory"]) == gpus


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="fsdp needs two GPUs")
def test_fsdp_on_nccl_agrees_and_holds_less_than_ddp_per_gpu(tmp_path):
    model = ["--model", "transformer", "--model-arg", "layers=4", "--model-arg", "dim=512"]
    base = ["train", "--nproc", "2", *model, "--optimizer", "adamw", "--epochs", "1", "--quiet"]
    for name in ("ddp", "fsdp"):
        proc = run_cli(*base, "--strategy", name, "--out", str(tmp_path / name))
        assert proc.returncode == 0, proc.stderr
    ddp, fsdp = (load_state(tmp_path / n / "final.pt") for n in ("ddp", "fsdp"))
    assert max_abs_diff(ddp, fsdp) <= 1e-4
    peaks = {
        n: max(
            m["bytes"]
            for m in json.loads((tmp_path / n / "metrics.json").read_text())["peak_memory"]
        )
        for n in ("ddp", "fsdp")
    }
    assert peaks["fsdp"] < peaks["ddp"], peaks


def test_compare_script_measures_a_torchrun_script_on_its_gpus(tmp_path):
    """compare --script on CUDA: the script sees the run's GPUs, and its memory is the CUDA
    allocator's peak per device."""
    from pathlib import Path

    script = Path(__file__).parent / "userscripts" / "cuda_ddp.py"
    sizes = ",".join(str(n) for n in range(1, min(torch.cuda.device_count(), 2) + 1))
    out = tmp_path / "out"
    proc = run_cli("compare", "--script", f"torchrun {script}", "--world-sizes", sizes,
                   "--repeats", "1", "--max-steps", "3", "--out", str(out), "--quiet")  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr  # 1: a check failed, not the run
    doc = json.loads((out / "results.json").read_text())
    for run in doc["runs"]:
        memory = run["memory"]
        assert memory["kind"] == "cuda_max_memory_allocated"
        assert len(memory["per_device"]) == run["world_size"]
        assert all(d["device"].startswith("cuda") for d in memory["per_device"])


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="a hang under NCCL needs two GPUs")
def test_watch_names_an_nccl_hang_and_diagnose_reads_nccls_dumps_and_watchdog(tmp_path):
    """Under NCCL, the watcher reads the same Flight Recorder (dpwise watch); a job run without
    dpwise leaves NCCL's dump on timeout and its watchdog's lines, which diagnose reads."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from conftest import child_env

    hangs = Path(__file__).parent / "hangs"
    shutil.copy(hangs / "nccl_guard.py", tmp_path)
    watched = run_cli("watch", "--hang-after", "3", "--on-hang", "stop", "--status-every", "0",
                      "--out",
                      str(tmp_path / "watch"), "--", "torchrun", "--nproc_per_node=2",
                      str(tmp_path / "nccl_guard.py"))  # fmt: skip
    assert watched.returncode == 1, watched.stderr
    assert "rank 0 waits in barrier" in watched.stderr and "nccl_guard.py line 20" in watched.stderr
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    prefix = str(dumps / "nccl_trace_rank_")
    env = child_env({"TORCH_NCCL_DUMP_ON_TIMEOUT": "1", "TORCH_FR_BUFFER_SIZE": "100",
                     "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": prefix})  # fmt: skip
    job = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
                          str(tmp_path / "nccl_guard.py")], env=env, capture_output=True,
                         text=True, timeout=120)  # fmt: skip
    (dumps / "job.log").write_text(job.stdout + job.stderr)
    got = run_cli("diagnose", str(dumps))
    assert got.returncode == 0, got.stderr
    assert "rank 0 waits in barrier" in got.stdout, got.stdout


def test_simulation_calibrated_against_the_cuda_allocator(tmp_path):
    """The simulation's figure (the tracker's peak) beside the CUDA caching allocator's, each case
    on a real GPU (bench/simulate_calibration.py): the tracker counts what the allocator hands
    out, so it lies within the allocator's active peak and 25 % of it; reserved adds its cache,
    the context the rest (docs/measurements.md states the figures)."""
    import subprocess
    import sys
    from pathlib import Path

    bench = Path(__file__).resolve().parents[1] / "bench" / "simulate_calibration.py"
    out = tmp_path / "calibration.json"
    proc = subprocess.run([sys.executable, str(bench), "--json", str(out)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for line in json.loads(out.read_text()):
        assert line["tracker_peak"] <= line["allocated_peak"] * 1.01, line
        assert line["tracker_peak"] >= 0.75 * line["allocated_peak"], line
        assert line["allocated_peak"] <= line["reserved_peak"], line
        assert line["context"] > 0, line
