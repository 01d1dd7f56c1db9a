"""Where each process of a launch was when the time limit ended it, read from faulthandler's dump
in its log (the harness's LIMIT_MARK): the process that went silent in the script's own code, and
the ones that waited for it in torch (a collective, a join of the processes it started)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from dpwise.userscript.harness import LIMIT_MARK

_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (.+)$')
_THREAD = ("Thread 0x", "Current thread 0x")  # how each thread's stack begins in the dump
# a frame in these is torch waiting for other processes: its peers, or the ones it started
_WAITING = ("torch/distributed/", "torch/nn/parallel/", "torch/multiprocessing/")


@dataclass(frozen=True)
class Stopped:
    """One process at the time limit: who it is ("rank 1", "its own process", "it"), the
    script's line it was at ("" where no frame was the script's), and whether it waited in
    torch for other processes."""

    who: str
    at: str
    waiting: bool


def stopped(logs: dict[str, Path], script: str) -> list[Stopped]:
    """The processes whose log (``logs``: who → log) holds the time limit's dump, in order."""
    found = []
    for who, log in logs.items():
        try:
            text = log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        stack = _stack(text, script)
        if stack is None:
            continue
        mine = [i for i, (path, _) in enumerate(stack) if Path(path).name == script]
        inner = stack[: mine[0]] if mine else stack[:1]
        waiting = any(mark in path.replace("\\", "/") for path, _ in inner for mark in _WAITING)
        at = f"{script} line {stack[mine[0]][1]}" if mine else ""
        found.append(Stopped(who, at, waiting))
    return found


def _stack(text: str, script: str) -> list[tuple[str, int]] | None:
    """The frames (file, line), innermost first, of the dump's thread that runs the script
    (else its last thread: the main one); None without a dump."""
    if LIMIT_MARK not in text:
        return None
    threads: list[list[tuple[str, int]]] = []
    for line in text[text.index(LIMIT_MARK) :].splitlines()[1:]:
        if line.startswith(_THREAD):
            threads.append([])
        elif threads and (frame := _FRAME.match(line)):
            threads[-1].append((frame[1], int(frame[2])))
    runs = [t for t in threads if any(Path(path).name == script for path, _ in t)]
    return (runs or threads[-1:] or [[]])[0]


def describe(found: list[Stopped]) -> str:
    """One clause: the processes that went silent and where, with those that waited for them
    ("rank 1 went silent at train.py line 12 (rank 0 waited for it at train.py line 13)"), or
    where every one waited; "" when no process left its dump."""
    silent = [s for s in found if not s.waiting]
    waited = [s for s in found if s.waiting]
    if silent:
        said = ", ".join(f"{s.who} went silent{_at(s)}" for s in silent)
        if waited:
            them = "it" if len(silent) == 1 else "them"
            said += f" ({', '.join(f'{w.who} waited for {them}{_at(w)}' for w in waited)})"
        return said
    if waited:
        each = ", ".join(f"{w.who}{_at(w)}" for w in waited)
        return f"every process waited for another in torch ({each})"
    return ""


def _at(s: Stopped) -> str:
    return f" at {s.at}" if s.at else ""
