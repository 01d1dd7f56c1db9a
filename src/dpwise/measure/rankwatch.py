"""What each rank of a watched job (`dpwise watch`) runs beside its training, unedited (the
user's script: userscript.watcher; dpwise's own train worker): a thread that every INTERVAL_S
seconds writes the rank's state to `rank<R>.json` in the folder DPWISE_WATCH_DIR names. The
state is the rank's optimizer steps and rows so far, the collectives
torch's Flight Recorder holds (each one's sequence number, op, sizes and whether it completed:
TORCH_FR_BUFFER_SIZE, set by the launch, turns the recorder on), and where the script's main
thread is (its Python stack, read from this thread while the main one waits in C++).

Nothing else changes: no seed, no sampler order, no step limit; the job's output is its own. A
write is whole or absent (a temporary file renamed), so a reader never sees half a state.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
import traceback
import weakref
from typing import Any

import torch

from dpwise.measure.meter import Meter

FOLDER = "DPWISE_WATCH_DIR"  # where each rank writes its state
INTERVAL_S = 0.5  # how often a rank writes its state
KEEP = 32  # the newest collectives a state holds
STATE = "rank{rank}.json"


def collectives(keep: int = KEEP) -> list[dict[str, Any]]:
    """The newest ``keep`` collectives the Flight Recorder holds in this process, oldest first:
    {seq, op, sizes, done, created_ns}. Empty before the process group exists, or when the
    recorder is off."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return []
    import pickle

    from torch._C._distributed_c10d import (  # type: ignore[attr-defined]  # not in torch's stubs
        _dump_fr_trace,
    )

    try:  # this process's own record, without the stacks (the watcher reads its own stack)
        entries = pickle.loads(_dump_fr_trace(True, False, False)).get("entries", [])
    except (RuntimeError, ValueError, pickle.UnpicklingError):  # no recorder, or a torn dump
        return []
    return [
        {
            "seq": int(e.get("collective_seq_id", 0)),
            "op": str(e.get("profiling_name", "")).split(":")[-1],
            "group": (e.get("process_group") or ["", ""])[0],
            "sizes": e.get("input_sizes", []),
            "done": bool(e.get("retired")) or e.get("state") == "completed",
            "created_ns": int(e.get("time_created_ns", 0)),
        }
        for e in entries[-keep:]
        if not e.get("is_p2p")
    ]


def main_stack() -> list[tuple[str, int, str]]:
    """Where the main thread is: its frames, outermost first, as (file, line, function); no
    source line is read."""
    frame = sys._current_frames().get(threading.main_thread().ident or 0)
    frames = []
    while frame is not None:
        frames.append((frame.f_code.co_filename, frame.f_lineno or 0, frame.f_code.co_name))
        frame = frame.f_back
    return frames[::-1]


class Watcher:
    """The rank's steps, rows, collectives and stack, written every INTERVAL_S seconds."""

    def __init__(self, folder: str, rank: int) -> None:
        self.folder = folder
        self.path = os.path.join(folder, STATE.format(rank=rank))
        self.rank = rank
        self.steps = 0
        self.rows = 0
        self.last_step = 0.0
        self.loaders: list[dict[str, Any]] = []  # each loader's batches, at its first pass
        self._last: list[dict[str, Any]] = []  # the collectives last read
        self._meter = Meter(read=0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="dpwise-watch", daemon=True)
        self._handles: list[Any] = []

    def start(self) -> Watcher:
        from torch.optim.optimizer import register_optimizer_step_post_hook

        self._meter.install()
        self._handles.append(register_optimizer_step_post_hook(self._stepped))
        _count_loaders(self.loaders)
        self.write()
        self._thread.start()
        return self

    def stop(self, ended: str = "returned", error: BaseException | None = None) -> None:
        """The last state, saying how the script ended; its stack is ``error``'s where it
        raised (the line that raised), else none (it is not anywhere in the script now)."""
        self._stop.set()
        self._thread.join(timeout=2 * INTERVAL_S)
        for handle in self._handles:
            handle.remove()
        self._meter.remove()
        frames = traceback.extract_tb(error.__traceback__) if error is not None else []
        self.write(ended=ended, stack=[(f.filename, f.lineno or 0, f.name) for f in frames])

    def _stepped(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        self._meter.step()
        record = self._meter.record
        self.steps += 1
        self.rows += sum(record.rows)
        self.last_step = time.time()
        for kept in (record.ends, record.rows, record.digests, record.rowsets):
            kept.clear()  # the totals are here: a long job keeps no list per step

    def _follow_group(self) -> None:
        """A spawned process's rank is its process group's once it has one (its spawn index
        until then): its state moves to that rank's file."""
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return
        rank = dist.get_rank()
        if rank != self.rank:
            old, self.rank = self.path, rank
            self.path = os.path.join(self.folder, STATE.format(rank=rank))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(old)

    def _collectives(self) -> list[dict[str, Any]]:
        """The recorder's collectives; once the process group is gone (a job that destroyed it
        before its end), the last ones read."""
        found = collectives()
        if found:
            self._last = found
        return found or self._last

    def _loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.write()

    def write(self, ended: str | None = None, stack: list[tuple[str, int, str]] | None = None
              ) -> None:  # fmt: skip
        self._follow_group()
        state = {
            "rank": self.rank,
            "pid": os.getpid(),
            "time": time.time(),
            "steps": self.steps,
            "rows": self.rows,
            "last_step": self.last_step,
            "collectives": self._collectives(),
            "stack": main_stack() if stack is None else stack,
            "loaders": list(self.loaders),
            "ended": ended,
        }
        partial = f"{self.path}.{threading.get_ident()}.tmp"
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(state, f)
        os.replace(partial, self.path)


def _count_loaders(into: list[dict[str, Any]]) -> None:
    """At the first pass over each DataLoader (its first `iter`), its number of batches and
    the line that iterates it, into ``into``: the ranks' counts are compared by the watch, not
    by a collective of the job's. A loader without a length (an iterable dataset) is skipped."""
    from torch.utils.data import DataLoader

    original = DataLoader.__iter__
    if getattr(original, "_dpwise_counted", False):
        return
    seen: weakref.WeakSet[DataLoader[Any]] = weakref.WeakSet()

    def __iter__(self: DataLoader[Any]) -> Any:
        if self not in seen:
            seen.add(self)
            try:
                batches = len(self)
            except TypeError:
                batches = None
            if batches is not None:
                caller = traceback.extract_stack(limit=2)[0]
                into.append({"batches": batches, "file": caller.filename,
                             "line": caller.lineno or 0})  # fmt: skip
        return original(self)

    __iter__._dpwise_counted = True  # type: ignore[attr-defined]  # our mark: installed
    DataLoader.__iter__ = __iter__  # type: ignore[method-assign]  # counted, on purpose


def from_env(rank: int) -> Watcher | None:
    """A started watcher where the environment asks for one (FOLDER set), else None."""
    folder = os.environ.get(FOLDER)
    return Watcher(folder, rank).start() if folder else None
