"""Shared helpers: run the CLI in a subprocess, load and compare parameters."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

FIXTURES = Path(__file__).parent / "fixtures"
FIXTURES_MIGRATE = Path(__file__).parent / "fixtures_migrate"


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "LOCAL_"))}
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join([str(FIXTURES), env.get("PYTHONPATH", "")])
    env.update(extra or {})
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 300):
    """`python -m dpwise ARGS` in a fresh process, like a user's shell."""
    return subprocess.run(
        [sys.executable, "-m", "dpwise", *args],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
    )


@pytest.fixture
def run_here(capfd, monkeypatch):
    """`dpwise ARGS` in this process, through ``dpwise.cli.main``: for tests that are about what
    a command does, not about what a fresh process does (its signals, exit, environment, process
    group, torchrun): each test of those keeps its own `run_cli`. Output is read at the file
    descriptors: what the command prints, not always what its launched workers print (they come
    from the fork server, whose output is where it was when an earlier test in this process
    started it): a test of what workers print keeps `run_cli`. The fixtures' modules import as
    they do under `run_cli` (its PYTHONPATH)."""
    from dpwise.cli import main

    monkeypatch.syspath_prepend(str(FIXTURES))

    def run(*args: str) -> subprocess.CompletedProcess:
        capfd.readouterr()  # what the test printed before is not this command's
        monkeypatch.setattr(sys, "argv", ["dpwise", *args])  # compare records its command line
        code = main(list(args))
        out, err = capfd.readouterr()
        return subprocess.CompletedProcess(["dpwise", *args], code, out, err)

    return run


def run_module(module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
    )


# The default workload trained with ddp on two processes for two epochs, uninterrupted.
DDP_REFERENCE = ["train", "--strategy", "ddp", "--nproc", "2", "--epochs", "2"]


@pytest.fixture(scope="session")
def ddp_reference(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """One `dpwise DDP_REFERENCE` run in a fresh process, shared by the tests that compare with
    it (the equivalence contract, the restarted runs): its folder and its process. Read it,
    never write into it. Made once for the whole session, also when the suite runs on several
    processes (pytest-xdist: the first to need it makes it under a lock, the others read it)."""
    import fcntl
    import json

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # every worker's base folder is in it
    out, record = shared / "ddp-reference" / "ddp", shared / "ddp-reference.json"
    with open(shared / "ddp-reference.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not record.exists():
            proc = run_cli(*DDP_REFERENCE, "--out", str(out))
            assert proc.returncode == 0, proc.stderr
            record.write_text(json.dumps([proc.args, proc.returncode, proc.stdout, proc.stderr]))
    args, code, stdout, stderr = json.loads(record.read_text())
    return out, subprocess.CompletedProcess(args, code, stdout, stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_state(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, map_location="cpu", weights_only=True)


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max((a[k].float() - b[k].float()).abs().max().item() for k in a)


@pytest.fixture
def userpkg(monkeypatch):
    monkeypatch.syspath_prepend(str(FIXTURES))
    return FIXTURES


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first (the order is otherwise kept): on several
    processes (make test) each file runs on one, and a long file started last would keep the
    others waiting at the end."""
    slow: dict[Path, int] = {}
    for item in items:
        slow[item.path] = slow.get(item.path, 0) + bool(item.get_closest_marker("slow"))
    items.sort(key=lambda item: -slow[item.path])


@pytest.fixture(autouse=True)
def _no_launcher_env(monkeypatch):
    """Tests run as plain processes, never as torchrun workers."""
    for key in ("TORCHELASTIC_RUN_ID", "LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(key, raising=False)


def descendants(root: int) -> set[int]:
    """Every process below ``root`` (children, their children …), from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, grew = set(), True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if pid not in found and (ppid == root or ppid in found):
                found.add(pid)
                grew = True
    return found
