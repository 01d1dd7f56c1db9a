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


def run_module(module: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300):
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        env=child_env(env),
        timeout=timeout,
    )


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
