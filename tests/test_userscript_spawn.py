"""A script that starts its own processes (`torch.multiprocessing.spawn`), run unedited on the
CPU: its processes run under the harness as torchrun's ranks do, the CPU stands in for CUDA and
NCCL, and a process that raises ends the run in one line naming its rank, its error and the
script's line. The guide's scripts are its own, verbatim (tests/lint_cases/guide)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

from dpwise.userscript.harness import MEASURED
from dpwise.userscript.run import ScriptFailed, launch_script

GUIDE = Path(__file__).parent / "lint_cases" / "guide"
HERE = Path(__file__).parent / "userscripts"  # a fixed ddp_train.py and a smaller common.py
STEPS = 3


def run(tmp: Path, script: Path, home: Path, kind: str, measure: bool = False) -> dict:
    (tmp / "run").mkdir()
    out = tmp / "run" / "params.pt"
    launch_script(
        script, [], home, out, steps=STEPS, nproc=1, timeout=60, measure=measure, devices=2,
        kind=kind,  # type: ignore[arg-type]
    )  # fmt: skip
    return torch.load(out, weights_only=True)


@pytest.fixture(scope="module")
def spawned(tmp_path_factory) -> tuple[dict, Path]:
    tmp = tmp_path_factory.mktemp("spawn_ddp")
    return run(tmp, HERE / "spawn_ddp.py", HERE, "spawns", measure=True), tmp / "run"


def test_the_guides_ddp_script_names_the_rank_its_error_and_its_line(tmp_path):
    """As published it never imports nn: every process it spawns raises in train()."""
    script = GUIDE / "ddp_train.py"
    line = next(
        n for n, text in enumerate(script.read_text().splitlines(), 1) if "nn.CrossEntropy" in text
    )
    with pytest.raises(ScriptFailed) as failed:
        run(tmp_path, script, GUIDE, "spawns")
    said = str(failed.value)
    assert "\n" not in said
    assert "NameError: name 'nn' is not defined" in said
    assert f"at ddp_train.py line {line}, in train" in said
    assert re.match(r"failed in a process it started \(rank [01] raised NameError", said)


def test_a_spawning_script_trains_on_two_ranks_that_each_measure(spawned):
    params, folder = spawned
    assert params["world_size"] == 2 and params["ddp_models"] == 1
    ranks = [json.loads((folder / f"{MEASURED}{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["rows"] == ranks[1]["rows"] and len(ranks[0]["rows"]) == STEPS
    # no DistributedSampler: both ranks train the same rows (the guide's pitfall, measured)
    assert ranks[0]["digests"] == ranks[1]["digests"] and len(set(ranks[0]["digests"])) == STEPS
    assert {p.name for p in folder.glob("verify-*.log")} == {
        "verify-main.log", "verify-rank0.log", "verify-rank1.log",
    }  # each process's output in its own log  # fmt: skip


def test_the_guides_dataparallel_script_trains_as_the_spawning_one_does(tmp_path, spawned):
    """dp_train.py as published, beside the smaller common.py: DataParallel on the CPU runs the
    module itself; each DDP rank trained the same rows, so their averaged gradient is the single
    process's, and both end with the same parameters."""
    single = run(tmp_path, GUIDE / "dp_train.py", HERE, "dataparallel")
    assert single["world_size"] == 1 and single["ddp_models"] == 0
    ddp = spawned[0]
    for a, b, c in zip(single["initial"], ddp["initial"], ddp["final"], strict=True):
        assert torch.equal(a, b) and not torch.equal(b, c)
    for a, b in zip(single["final"], ddp["final"], strict=True):
        assert torch.allclose(a, b, rtol=0, atol=1e-5)


def test_a_spawned_process_that_hangs_is_ended_at_the_time_limit_with_its_stack(tmp_path):
    (tmp_path / "run").mkdir()
    with pytest.raises(ScriptFailed, match=r"^did not end within 2 s"):
        launch_script(
            HERE / "spawn_hangs.py", [], HERE, tmp_path / "run" / "params.pt", steps=STEPS,
            nproc=1, timeout=2, devices=2, kind="spawns",
        )  # fmt: skip
    stack = (tmp_path / "run" / "verify-rank1.log").read_text()
    assert stack.startswith("Timeout (") and 'spawn_hangs.py", line 9 in train' in stack
