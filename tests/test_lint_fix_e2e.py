"""The fixes on a real run: a DDP script with all seven fixable pitfalls, run on the CPU with gloo
under torchrun before and after `dpwise lint --fix --unsafe-fixes`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from conftest import run_cli

SCRIPT = Path(__file__).parent / "lint_cases" / "e2e" / "seven_pitfalls.py"


def torchrun(script: Path, out: Path, nproc: int = 2) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_PORT", "MASTER_ADDR")}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            f"--nproc_per_node={nproc}",
            str(script),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=script.parent,
    )


@pytest.mark.slow
def test_the_fixed_script_trains_where_the_original_fails(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.read_text(encoding="utf-8"), encoding="utf-8")
    # the original fails where every process builds its loader: one worker shows it
    before = torchrun(script, tmp_path / "before.pt", nproc=1)
    said = before.stdout[-3000:] + before.stderr[-3000:]
    assert before.returncode != 0, said
    assert "sampler option is mutually exclusive with shuffle" in said

    fixed = run_cli(
        "lint", str(script), "--fix", "--unsafe-fixes", "--format", "concise", timeout=120
    )
    assert fixed.stdout.strip() == "Found 7 issues (7 fixed, 0 remaining).", fixed.stderr
    assert fixed.returncode == 0, fixed.stderr

    # With torch 2.13 on gloo, a two-process run sometimes aborts at interpreter exit with
    # "terminate called without an active exception", independent of these fixes: a minimal
    # DDP script (16 steps, destroy_process_group at the end) did so in 2 of 30 runs on this
    # machine, and 1 of 30 with a barrier and the wrapper freed first. A clean exit in one of
    # three tries is asked for; the checkpoint checks below hold for every try.
    for _ in range(3):
        after = torchrun(script, tmp_path / "after.pt")
        if after.returncode == 0:
            break
        said = after.stdout[-3000:] + after.stderr[-3000:]
        assert "terminate called without an active exception" in said, said
    assert after.returncode == 0, after.stdout[-3000:] + after.stderr[-3000:]
    saved = torch.load(tmp_path / "after.pt")
    assert sorted(saved["model"]) == ["block.bias", "block.weight", "head.bias", "head.weight"]
    first_epoch, second_epoch = saved["firsts"]
    assert first_epoch != second_epoch  # set_epoch: the second epoch is shuffled anew
