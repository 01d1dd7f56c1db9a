"""Each launch keeps its files (torch's launcher logs, error files, pid files) in a temporary
folder of its own and removes it: a run that succeeds or fails leaves nothing in TMPDIR."""

from __future__ import annotations

import pytest
from live_run import LEFT_BY_TORCH

from conftest import run_cli

pytestmark = pytest.mark.slow

TINY = ["--data", "userpkg:tiny_data", "--batch-size", "8", "--epochs", "1"]


def _left(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if not p.name.startswith(LEFT_BY_TORCH))


@pytest.mark.parametrize(
    ("model", "code"), [("userpkg:tiny_model", 0), ("userpkg:exploding_model", 1)]
)
def test_a_ddp_train_leaves_nothing_in_the_temporary_folder(tmp_path, model, code):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    proc = run_cli("train", "--strategy", "ddp", "--nproc", "2", "--model", model, *TINY,
                   env={"TMPDIR": str(tmp)})  # fmt: skip
    assert proc.returncode == code, proc.stderr
    assert _left(tmp) == []
