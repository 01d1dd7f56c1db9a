"""`dpwise compare --script`: the user's own scripts, unedited, through compare's checks and report
(in this process: the claims are about what compare measures and writes; the scripts' own
processes are launched as the user launches them)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).parent / "userscripts"


@pytest.fixture
def scripts(tmp_path):
    """The scripts in a folder of their own, with the rows they read from a file."""
    home = tmp_path / "project"
    shutil.copytree(SCRIPTS, home)
    generator = torch.Generator().manual_seed(3)
    rows = {
        "x": torch.randn(256, 16, generator=generator),
        "y": torch.randn(256, 1, generator=generator),
    }
    torch.save(rows, home / "rows.pt")
    return home


@pytest.mark.slow
def test_a_script_and_its_torchrun_twin_are_compared_like_compare_s_own_runs(
    scripts, run_here, monkeypatch
):
    """The bare path, the DataParallel script and the torchrun line are launched as they say;
    the DataParallel script (the whole batch to the wrapper, two devices) and the DDP script
    (a DistributedSampler, half the batch per rank) train the one-process script's model; the
    report is compare's, its runs named after the scripts."""
    monkeypatch.chdir(scripts)
    out = scripts / "report"
    got = run_here(
        "compare", "--script", "mlp_single.py --data rows.pt",
        "--script", "dp_mlp.py --data rows.pt",
        "--script", "torchrun --nproc_per_node=2 mlp_ddp.py --data rows.pt",
        "--world-sizes", "2", "--repeats", "1", "--max-steps", "4", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc = json.loads((out / "results.json").read_text())
    runs = {r["id"]: r for r in doc["runs"]}
    assert list(runs) == ["mlp_single-1", "dp_mlp-2", "mlp_ddp-2"]
    assert [(r["strategy"], r["world_size"]) for r in doc["runs"]] == [
        ("single", 1), ("dp", 2), ("ddp", 2)]  # fmt: skip
    facts = [(r["script"]["kind"], r["script"]["rows_per_rank"]) for r in doc["runs"]]
    assert facts == [("single", [32]), ("dataparallel", [32]), ("torchrun", [16, 16])]
    assert all(r["max_param_diff_vs_single"] <= 1e-5 for r in doc["runs"])
    assert len(runs["mlp_single-1"]["samples_per_s"]["values"]) == 1  # one per repeat
    checks = {c["name"]: c["status"] for c in doc["checks"]}
    assert checks["convergence"] == "pass" and checks["communication"] == "pass"
    comm = runs["mlp_ddp-2"]["communication"]  # DDP all-reduces every gradient byte, per step
    assert comm["bytes_all_reduced_per_step"] == comm["gradient_bytes"] == (16 * 32 + 32 + 33) * 4
    memory = runs["mlp_ddp-2"]["memory"]
    assert memory["kind"] == "cpu_live_tensors" and len(memory["per_device"]) == 2
    assert all(d["peak_bytes"] > 0 for d in memory["per_device"])
    assert runs["mlp_ddp-2"]["threads_per_process"] == 1  # torchrun's one thread per worker
    assert (out / runs["mlp_ddp-2"]["trace"]).exists()
    assert doc["workload"]["scripts"] == {
        "mlp_single.py --data rows.pt": "single",
        "dp_mlp.py --data rows.pt": "dataparallel",
        "torchrun --nproc_per_node=2 mlp_ddp.py --data rows.pt": "torchrun",
    }
    assert (out / "report.html").exists() and "mlp_ddp" in (out / "report.md").read_text()
    logs = sorted(p.name for p in (out / "runs" / "mlp_ddp-2").glob("rank*.log"))
    assert logs == ["rank0.log", "rank1.log"]
    advised = run_here("advise", "--from", str(out / "results.json"))  # advise reads the report
    assert advised.returncode == 0, advised.stderr
    assert "no scaling projection: your scripts are measured, not modelled" in advised.stdout


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--script", "python 'a.py"], "does not parse as a command line"),
        (["missing.py"], "missing.py does not exist"),
        (["mlp_single.py", "--model", "cnn"], "--model is for dpwise's own training loop"),
        (["mlp_single.py", "--epochs", "2"], "--epochs is for dpwise's own training loop"),
    ],
)
def test_a_user_mistake_is_one_line_and_writes_nothing(scripts, run_here, monkeypatch, args, said):
    monkeypatch.chdir(scripts)
    out = scripts / "out"
    got = run_here("compare", *args, "--out", str(out))
    assert got.returncode == 2
    assert said in got.stderr and len(got.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_a_script_that_fails_on_one_rank_names_it_and_writes_nothing(
    scripts, run_here, monkeypatch
):
    monkeypatch.chdir(scripts)
    out = scripts / "out"
    got = run_here(
        "compare", "--script", "torchrun fails_on_rank1.py", "--world-sizes", "2",
        "--repeats", "1", "--max-steps", "4", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert got.returncode == 1, got.stderr
    last = got.stderr.strip().splitlines()[-1]
    assert "(rank 1, fails_on_rank1.py line 12: ValueError: the batch on rank 1 is empty)" in last
    assert not out.exists()


GUIDE = Path(__file__).parent / "lint_cases" / "guide"


@pytest.mark.slow
def test_the_guides_scripts_are_said_to_train_other_computations(scripts, run_here, monkeypatch):
    """The guide's dp_train.py as published against its ddp_train.py fixed (spawn_ddp.py: it
    never imported nn), on the smaller data of common.py beside them: every rank of the DDP
    script trains the same 256 rows (no DistributedSampler), so it feeds its model 512 rows per
    step against 256: said, with lint's rule and line, and its parameters are not judged."""
    shutil.copy(GUIDE / "dp_train.py", scripts / "dp_train.py")
    monkeypatch.chdir(scripts)
    out = scripts / "report"
    got = run_here("compare", "dp_train.py", "spawn_ddp.py", "--world-sizes", "2",
                   "--repeats", "1", "--max-steps", "3", "--out", str(out), "--quiet")  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc = json.loads((out / "results.json").read_text())
    dp, ddp = (r["script"] for r in doc["runs"])
    assert (dp["kind"], dp["rows_per_step"], dp["same_rows_on_every_rank"]) == (
        "dataparallel", 256, False)  # fmt: skip
    assert (ddp["kind"], ddp["rows_per_rank"], ddp["same_rows_on_every_rank"]) == (
        "spawns", [256, 256], True)  # fmt: skip
    assert ddp["loader"].startswith("missing-distributed-sampler at spawn_ddp.py line ")
    convergence = next(c for c in doc["checks"] if c["name"] == "convergence")
    assert convergence["status"] == "skip" and "not the same computation" in convergence["summary"]
    said = doc["recommendation"]["reasons"]
    assert "every rank trained the same rows" in said[0] and "512 rows per optimizer" in said[1]


@pytest.mark.slow
def test_rows_drawn_per_rank_are_named_and_the_world_sizes_are_scaled(
    scripts, run_here, monkeypatch
):
    """nanoGPT's batching (random indices from a generator seeded per rank, no sampler) feeds
    as many rows per step as the one-process script, but other ones: said for each size, its
    parameters not judged; and the torchrun script at 1 and 2 processes is what the
    scalability check reads."""
    monkeypatch.chdir(scripts)
    out = scripts / "report"
    got = run_here("compare", "mlp_single.py --data rows.pt",
                   "torchrun mlp_draws.py --data rows.pt", "--world-sizes", "1,2",
                   "--repeats", "1", "--max-steps", "3", "--out", str(out), "--quiet")  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc = json.loads((out / "results.json").read_text())
    assert [(r["label"], r["script"]["rows_per_step"]) for r in doc["runs"]] == [
        ("mlp_single.py", 32), ("mlp_draws.py × 1", 32), ("mlp_draws.py × 2", 32)]  # fmt: skip
    sets = [r["script"]["row_sets"] for r in doc["runs"]]
    assert len({len(s) for s in sets}) == 1 and all(len(set(s)) == len(s) for s in sets)
    said = doc["workload"]["findings"]
    assert [line.split(" fed its model other rows than mlp_single.py at optimizer step ")[0]
            for line in said] == ["mlp_draws.py × 1", "mlp_draws.py × 2"]  # fmt: skip
    assert all("a data order that is not the sampler's" in line for line in said)
    checks = {c["name"]: c for c in doc["checks"]}
    assert checks["convergence"]["status"] == "skip"
    assert "not the same computation" in checks["convergence"]["summary"]
    scaling = checks["scalability"]  # judged over the sizes, or the machine named as too busy
    assert scaling["status"] in ("pass", "warn", "fail"), scaling["summary"]
    said = scaling["summary"]
    assert "efficiency at 2:" in said or said.startswith("contention, not scaling: "), said


def test_the_guides_ddp_script_as_published_names_its_error_and_line(
    scripts, run_here, monkeypatch
):
    for name in ("dp_train.py", "ddp_train.py"):
        shutil.copy(GUIDE / name, scripts / name)
    monkeypatch.chdir(scripts)
    out = scripts / "report"
    got = run_here("compare", "dp_train.py", "ddp_train.py", "--world-sizes", "2",
                   "--repeats", "1", "--max-steps", "3", "--out", str(out), "--quiet")  # fmt: skip
    assert got.returncode == 1
    last = got.stderr.strip().splitlines()[-1]
    assert "NameError: name 'nn' is not defined at ddp_train.py line 22" in last
    assert not out.exists()


def test_reference_puts_the_named_script_first_and_a_name_not_given_is_one_line():
    from dpwise.commands.compare import _reference_first
    from dpwise.errors import DpwiseError

    given = ["python a.py --x 1", "torchrun --nproc_per_node=2 b.py"]
    assert _reference_first(given, "b.py") == [given[1], given[0]]
    assert _reference_first(given, given[0]) == given
    with pytest.raises(DpwiseError, match=r"--reference c.py: no script given is c.py"):
        _reference_first(given, "c.py")
