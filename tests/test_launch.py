"""Workers that fail: the command fails with the worker's error and leaves no process behind."""

import os
import time

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow

TINY = ["--data", "userpkg:tiny_data", "--batch-size", "8", "--epochs", "1"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as fh:  # a zombie is dead, just not yet reaped
        return fh.read().split()[2] != "Z"


def test_a_crashing_worker_fails_the_command_and_is_cleaned_up(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    proc = run_cli(
        "train",
        "--strategy",
        "ddp",
        "--model",
        "userpkg:exploding_model",
        *TINY,
        env={"DPWISE_TEST_PIDS": str(pids)},
    )
    assert proc.returncode == 1
    assert "RuntimeError: forward exploded on rank 1" in proc.stderr  # the worker's own error
    assert "dpwise: worker rank 1 failed" in proc.stderr.splitlines()[-1]
    workers = [int(p.stem) for p in pids.iterdir()]
    assert len(workers) == 2
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in workers if _alive(pid)]


def test_a_user_error_inside_workers_is_one_line_and_exit_2(tmp_path):
    proc = run_cli(
        "train",
        "--strategy",
        "ddp",
        "--model",
        "userpkg:fails_on_rank1",
        *TINY,
        "--out",
        str(tmp_path / "o"),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "dpwise: error: --model userpkg:fails_on_rank1: the factory raised RuntimeError: "
        "cannot build on rank 1"
    ]
    assert not (tmp_path / "o").exists()


def test_the_worker_that_failed_is_named_before_the_peers_that_lost_it(tmp_path):
    """torch's launcher reports the first ended worker it finds (rank order) and error files
    in whole seconds: a peer that lost its connection can be the one reported. The cause is
    the worker whose own error is on disk (recorded before it let go of the group)."""
    import json
    from types import SimpleNamespace

    from torch.distributed.elastic.multiprocessing.errors import ProcessFailure

    from dpwise.launch.elastic import _root_failure

    said = {0: "RuntimeError: [pair.cc:537] Read error [127.0.0.1]:1: Connection reset by peer",
            1: "RuntimeError: forward exploded on rank 1"}  # fmt: skip
    for rank, message in said.items():
        folder = tmp_path / "attempt_0" / str(rank)
        folder.mkdir(parents=True)
        record = {"message": message, "extraInfo": {"py_callstack": "", "timestamp": "100"}}
        (folder / "error.json").write_text(json.dumps({"message": record}))
    reported = ProcessFailure(0, 4242, 1, str(tmp_path / "attempt_0" / "0" / "error.json"))
    rank, failure = _root_failure(SimpleNamespace(failures={0: reported}))
    assert rank == 1 and failure.message["message"] == said[1]
