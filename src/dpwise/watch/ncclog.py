"""A job's own log, read for the lines NCCL's watchdog writes when a collective times out
(ProcessGroupNCCL), as the ranks' states: each rank's timed-out work (its sequence number, op
and size) and the last work it completed.

    [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=80, OpType=ALLREDUCE,
    NumelIn=2106881, NumelOut=2106881, Timeout(ms)=600000) ran for 600013 milliseconds …
    [PG 0 (default_pg) Rank 3] Exception (either an error or timeout) detected by watchdog at
    work: 80, last enqueued NCCL work: 80, last completed NCCL work: 79.

The lines say where each rank waits but not at which line of the script: no stack is in them.
"""

from __future__ import annotations

import re
from pathlib import Path

from dpwise.watch.state import Collective, RankState

_TIMEOUT = re.compile(
    r"\[Rank (?P<rank>\d+)\] Watchdog caught collective operation timeout: "
    r"WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:, NumelIn=(?P<numel>\d+))?"
)
_COMPLETED = re.compile(
    r"Rank (?P<rank>\d+)\] Exception \(either an error or timeout\) detected by watchdog at "
    r"work: (?P<seq>\d+), last enqueued NCCL work: \d+, last completed NCCL work: (?P<done>-?\d+)"
)
LOG_SUFFIXES = (".log", ".txt", ".out", ".err")
_MAX_BYTES = 64 * 1024 * 1024  # the end of a larger log is read


def states(text: str) -> list[RankState]:
    """Each rank's first timed-out work in ``text``, and the last work it completed before."""
    waits: dict[int, Collective] = {}
    done: dict[int, int] = {}
    for line in text.splitlines():
        if (m := _TIMEOUT.search(line)) is not None:
            rank = int(m["rank"])
            sizes = ((int(m["numel"]),),) if m["numel"] else ()
            waits.setdefault(rank, Collective(int(m["seq"]), m["op"].lower(), sizes, False))
        elif (m := _COMPLETED.search(line)) is not None:
            done.setdefault(int(m["rank"]), int(m["done"]))
    found = []
    for rank, wait in sorted(waits.items()):
        last = done.get(rank, wait.seq - 1)
        before = (Collective(last, "", (), True),) if last > 0 else ()
        found.append(RankState(rank, 0, 0.0, 0, 0, (*before, wait), (), None))
    return found


def read(folder: Path) -> list[RankState]:
    """The watchdog's lines in the logs in ``folder``, every rank's from every log."""
    found: dict[int, RankState] = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix in LOG_SUFFIXES:
            with path.open("rb") as f:
                size = path.stat().st_size
                f.seek(max(0, size - _MAX_BYTES))
                text = f.read().decode("utf-8", errors="replace")
            for s in states(text):
                found.setdefault(s.rank, s)
    return [found[r] for r in sorted(found)]
