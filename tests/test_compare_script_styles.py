"""`dpwise compare --script` on scripts in the styles users train with (tests/userscripts, our
own, written from the patterns of public training code): nanoGPT's accumulation by DDP's
`require_backward_grad_sync`, an LR schedule with clipping and AdamW under `mp.spawn`, and the
transformers Trainer under torchrun (`nn.DataParallel` against torchrun: test_compare_scripts).
Each pair trains the same computation (one global batch, split over the ranks by a
DistributedSampler), so the report must say what each script is, the rows it feeds per step,
and that the parameters agree."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

SCRIPTS = Path(__file__).parent / "userscripts"
AGREE = 1e-5  # float32 sums in another order over a few steps; far below compare's tolerance


@pytest.fixture
def scripts(tmp_path, monkeypatch):
    """The scripts in a folder of their own (the one compare runs in), with the rows the
    argparse scripts read from a file."""
    home = tmp_path / "project"
    shutil.copytree(SCRIPTS, home)
    generator = torch.Generator().manual_seed(3)
    rows = {"x": torch.randn(256, 16, generator=generator),
            "y": torch.randn(256, 1, generator=generator)}  # fmt: skip
    torch.save(rows, home / "rows.pt")
    monkeypatch.chdir(home)
    return home


def compared(run_here, home: Path, *commands: str) -> dict:
    out = home / "report"
    args = [a for c in commands for a in ("--script", c)]
    got = run_here("compare", *args, "--world-sizes", "2", "--repeats", "1", "--max-steps", "3",
                   "--out", str(out), "--quiet")  # fmt: skip
    assert got.returncode == 0, got.stderr
    doc: dict = json.loads((out / "results.json").read_text())
    return doc


def agreed(doc: dict) -> None:
    """The second run trains the first's computation: no finding, its parameters within AGREE,
    the convergence check passed."""
    assert doc["workload"]["findings"] == []
    assert 0 <= doc["runs"][1]["max_param_diff_vs_single"] <= AGREE
    convergence = next(c for c in doc["checks"] if c["name"] == "convergence")
    assert convergence["status"] == "pass", convergence["summary"]


def facts(doc: dict) -> list[tuple]:
    return [(s["kind"], s["rows_per_step"], s["rows_per_rank"], s["same_rows_on_every_rank"])
            for s in (r["script"] for r in doc["runs"])]  # fmt: skip


@pytest.mark.slow
def test_nanogpt_style_accumulation_under_python_and_torchrun(scripts, run_here):
    """One file for both launches: `python` runs it alone (4 micro-batches of 8 rows per step),
    torchrun on two ranks (2 each, gradients synced on the last only): 32 rows per step
    either way."""
    doc = compared(run_here, scripts, "python nano_accum.py",
                   "torchrun --nproc_per_node=2 nano_accum.py")  # fmt: skip
    assert facts(doc) == [("single", 4 * 8, [4 * 8], False),
                          ("torchrun", 2 * 2 * 8, [2 * 8, 2 * 8], False)]  # fmt: skip
    assert [r["strategy"] for r in doc["runs"]] == ["single", "ddp"]
    agreed(doc)


@pytest.mark.slow
def test_a_schedule_with_clipping_and_adamw_alone_and_spawned(scripts, run_here):
    """LambdaLR warm-up and cosine, clip_grad_norm_, AdamW with two parameter groups: alone,
    and under mp.spawn with DDP (its NCCL, device ids and fixed port stood in on the CPU)."""
    doc = compared(run_here, scripts, "sched_single.py", "sched_spawn.py")
    assert facts(doc) == [("single", 32, [32], False), ("spawns", 32, [16, 16], False)]
    comm = doc["runs"][1]["communication"]
    assert comm["bytes_all_reduced_per_step"] == comm["gradient_bytes"] == (12 * 24 + 24 + 50) * 4
    assert all((scripts / "report" / r["trace"]).is_file() for r in doc["runs"])
    agreed(doc)


@pytest.mark.slow
def test_the_transformers_trainer_alone_and_under_torchrun(scripts, run_here):
    """A tiny GPT-2 through the Trainer: 16 rows per device alone, 8 per rank under torchrun
    (the Trainer's own seeded sampler, split over the ranks by accelerate, a dev dependency).
    About 16 s of CPU: each launch imports transformers."""
    doc = compared(run_here, scripts, "python hf_trainer.py",
                   "torchrun --nproc_per_node=2 hf_trainer.py --per-device-batch 8")  # fmt: skip
    assert facts(doc) == [("single", 16, [16], False), ("torchrun", 16, [8, 8], False)]
    agreed(doc)
