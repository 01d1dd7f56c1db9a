"""The equivalence contract through the CLI: single == dp == ddp, and torchrun == dpwise."""

import contextlib
import io
import json
import subprocess
from pathlib import Path

import pytest

from conftest import load_state, max_abs_diff, run_module
from dpwise.cli import main

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def torchrun(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """`dpwise train --strategy ddp` under torchrun (a fresh process): its folder and process."""
    out = tmp_path_factory.mktemp("equivalence") / "torchrun"
    proc = run_module(
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node=2",
        "-m",
        "dpwise",
        "train",
        "--strategy",
        "ddp",
        "--epochs",
        "2",
        "--out",
        str(out),
    )
    assert proc.returncode == 0, proc.stderr
    return out, proc


@pytest.fixture(scope="module")
def here(tmp_path_factory) -> tuple[dict[str, Path], dict[str, subprocess.CompletedProcess]]:
    """single and dp, each in this process through the command: their folders and outputs."""
    root = tmp_path_factory.mktemp("equivalence")
    folders = {name: root / name for name in ("single", "dp")}
    results = {}
    for name in ("single", "dp"):  # one process each: here, through the command
        out, err = io.StringIO(), io.StringIO()
        args = ["train", "--strategy", name, "--epochs", "2", "--out", str(folders[name])]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
        assert code == 0, err.getvalue()
        results[name] = subprocess.CompletedProcess([name], code, out.getvalue(), err.getvalue())
    return folders, results


@pytest.fixture(scope="module")
def runs(here, ddp_reference):
    """single and dp (``here``) and the shared ddp run (a fresh process:
    conftest.ddp_reference), each through the CLI; torchrun's is its own fixture."""
    folders, results = dict(here[0]), dict(here[1])
    folders["ddp"], results["ddp"] = ddp_reference
    return folders, results


def test_single_and_dp_end_with_the_same_parameters(here):
    folders, _ = here
    diff = max_abs_diff(
        load_state(folders["single"] / "final.pt"), load_state(folders["dp"] / "final.pt")
    )
    assert diff <= 1e-5, f"dp differs from single by {diff:.3e}"


def test_ddp_ends_with_singles_parameters(runs):
    """(single from ``here``, which the test before made; ddp: conftest.ddp_reference.)"""
    folders, _ = runs
    diff = max_abs_diff(
        load_state(folders["single"] / "final.pt"), load_state(folders["ddp"] / "final.pt")
    )
    assert diff <= 1e-5, f"ddp differs from single by {diff:.3e}"


def test_state_dicts_are_saved_unwrapped(runs, torchrun):
    folders = {**runs[0], "torchrun": torchrun[0]}
    for name in ("single", "dp", "ddp", "torchrun"):
        keys = list(load_state(folders[name] / "final.pt"))
        assert keys == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"], name


def test_torchrun_gives_the_same_run_with_exactly_two_workers(runs, torchrun):
    folders, results = {**runs[0], "torchrun": torchrun[0]}, {**runs[1], "torchrun": torchrun[1]}
    diff = max_abs_diff(
        load_state(folders["ddp"] / "final.pt"), load_state(folders["torchrun"] / "final.pt")
    )
    assert diff <= 1e-6
    workers = json.loads((folders["torchrun"] / "metrics.json").read_text())["workers"]
    assert [w["rank"] for w in workers] == [0, 1]
    assert len({w["pid"] for w in workers}) == 2
    assert results["torchrun"].stdout.count("epoch 2/2") == 1  # rank 0 prints, once


def test_metrics_json_has_what_users_read(runs):
    folders, _ = runs
    metrics = json.loads((folders["ddp"] / "metrics.json").read_text())
    assert metrics["strategy"] == "ddp" and metrics["world_size"] == 2
    assert metrics["backend"] == "gloo" and metrics["device"] == "cpu"
    assert metrics["torch_version"].startswith("2.")
    assert len(metrics["epochs"]) == 2
    for epoch in metrics["epochs"]:
        assert epoch["seconds"] > 0 and epoch["samples_per_s"] > 0
    assert len(metrics["losses"]) == 2 * 39 and metrics["final_loss"] == metrics["losses"][-1]
    assert metrics["rows_dropped_per_epoch"] == 10_000 - 39 * 256
    assert {(m["rank"], m["kind"]) for m in metrics["peak_memory"]} == {
        (0, "cpu_peak_rss"),
        (1, "cpu_peak_rss"),
    }
    assert all(m["bytes"] > 0 for m in metrics["peak_memory"])


def test_only_rank_zero_writes(runs, torchrun):
    folders = {**runs[0], "torchrun": torchrun[0]}
    for name in ("ddp", "torchrun"):
        assert sorted(p.name for p in folders[name].iterdir()) == ["final.pt", "metrics.json"]


def test_dp_on_cpu_says_it_is_the_single_process_run(runs):
    _, results = runs
    assert "equals the single-process run" in results["dp"].stdout
    assert "epoch 2/2" in results["single"].stdout  # its lines were captured: none says so
    assert "equals the single-process run" not in results["single"].stdout
