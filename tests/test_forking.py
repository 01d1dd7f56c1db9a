"""The fork server every process dpwise starts comes from: a forked worker gets the parent's
environment at launch time (as a spawned one would) plus what its launcher set, and every command
that starts processes starts the server before it imports torch (so the imports overlap)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import child_env
from dpwise.launch import forking


def _report(queue, *keys: str) -> None:
    queue.put([os.environ.get(key) for key in keys])


def test_a_forked_worker_sees_the_parent_environment_at_launch_not_at_server_start(monkeypatch):
    ctx = forking.context()
    forking.ensure_running()
    monkeypatch.setenv("DPWISE_TEST_LATE", "set after the server started")
    queue = ctx.SimpleQueue()
    entry = forking.AsParent(_report, {"DPWISE_TEST_EXTRA": "extra"})
    child = ctx.Process(target=entry, args=(queue, "DPWISE_TEST_LATE", "DPWISE_TEST_EXTRA"))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get() == ["set after the server started", "extra"]


def _collected(queue) -> None:
    """What a forked process's collector sees: the objects frozen by the server, and what a
    full collection finds to look at besides (torch's objects would be hundreds of thousands)."""
    import gc

    import torch

    torch.nn.Linear(2, 2)  # a training's own objects are still collected
    queue.put((gc.get_freeze_count(), gc.isenabled(), len(gc.get_objects())))


def test_a_forked_process_does_not_collect_what_the_server_imported():
    ctx = forking.context()
    forking.ensure_running()
    queue = ctx.SimpleQueue()
    child = ctx.Process(target=forking.AsParent(_collected), args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    frozen, collecting, seen = queue.get()
    assert frozen > 100_000  # torch and torch._dynamo, out of the collector's sight
    assert collecting  # off for the server's imports only (unfrozen), on in what it forks
    assert seen < frozen / 10  # a collection walks only what the process made


def _grandchild(queue) -> None:
    queue.put(os.getppid())


def _borrower(lent, queue) -> None:
    """Forked by the server: borrow it, start a process of its own, stop 'its' server at exit."""
    borrowed = forking.borrow(lent)
    ctx = forking.context()
    forking.ensure_running()  # a no-op once borrowed: no server of its own
    child = ctx.Process(target=_grandchild, args=(queue,))
    child.start()
    child.join(60)
    forking.stop_now()  # a borrower never stops its owner's server
    queue.put((borrowed, child.exitcode, forking.server_pid()))


def test_a_process_the_server_forked_starts_its_own_from_the_same_server():
    """A compare run forks its launched workers from the command's server, not from a second
    one that would import torch again."""
    ctx = forking.context()
    forking.ensure_running()
    server = forking.server_pid()
    queue = ctx.SimpleQueue()
    child = ctx.Process(target=_borrower, args=(forking.lend(), queue))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert queue.get() == server  # the grandchild's parent: the same server
    assert queue.get() == (True, 0, server)
    os.kill(server, 0)  # still running after the borrower's stop_now
    assert not forking.borrow(forking.lend())  # here (the server's owner) nothing to borrow


def test_adopt_keeps_what_the_launcher_set_since_the_fork(monkeypatch):
    """Here the server's environment (BASELINE) had A=server and no RANK; the launcher set RANK
    after the fork; the parent has A=parent and B. The worker ends with the parent's plus RANK."""
    monkeypatch.setattr(forking, "BASELINE", {"A": "server"})
    monkeypatch.setattr(forking, "_IMPORTED_IN", -1)  # imported in the server, not here
    monkeypatch.setattr(os, "environ", {"A": "server", "RANK": "3"})
    forking.adopt({"A": "parent", "B": "b"})
    assert os.environ == {"A": "parent", "B": "b", "RANK": "3"}


def test_where_the_server_did_not_import_it_adopt_only_adds(monkeypatch):
    monkeypatch.setattr(forking, "_IMPORTED_IN", os.getpid())
    monkeypatch.setattr(os, "environ", {"RANK": "3", "A": "own"})
    forking.adopt({"A": "parent", "B": "b"})
    assert os.environ == {"RANK": "3", "A": "own", "B": "b"}


# Each command that starts processes, stopped where it starts the fork server: torch must not be
# imported yet (its workers' imports would wait for the command's own instead of overlapping).
COMMANDS = {
    "train": ["train", "--strategy", "ddp", "--nproc", "2"],
    "compare": ["compare"],
    "migrate": ["migrate", "SCRIPT", "--verify"],
    "probe-link": ["probe-link"],
}
STOP_AT_SERVER = """
import sys
from dpwise.launch import forking
def stop(*modules):
    print("torch" in sys.modules, *modules)
    raise SystemExit(0)
forking.ensure_running = stop
from dpwise.cli import main
raise SystemExit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_command_starts_the_fork_server_before_it_imports_torch(command, tmp_path):
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    args = [str(script) if a == "SCRIPT" else a for a in COMMANDS[command]]
    done = subprocess.run(
        [sys.executable, "-c", STOP_AT_SERVER, *args],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    imported, *modules = done.stdout.split()
    assert imported == "False", f"{command} imported torch before it started the fork server"
    assert modules and modules[0].startswith("dpwise."), "it preloads its workers' module"


# one step on 256 rows: the default's 10,000 would be made for nothing
ONE_STEP = ["--epochs", "1", "--max-steps", "1", "--data-arg", "samples=256"]


def test_a_single_process_train_starts_no_fork_server():
    done = subprocess.run(
        [sys.executable, "-c", STOP_AT_SERVER, "train", *ONE_STEP],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "False" not in done.stdout and "True" not in done.stdout
