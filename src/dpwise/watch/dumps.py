"""What a job run without dpwise left, read as the ranks' states: torch's Flight Recorder dumps
(NCCL's dump on timeout, one file per rank named `<TORCH_NCCL_DEBUG_INFO_TEMP_FILE><rank>`, or
a dump the user's own call wrote: `_dump_fr_trace` pickled or `_dump_fr_trace_json`), and
torchelastic's error files (`error.json`: what a rank raised).

A pickled dump is read by an unpickler that builds only plain values (dicts, lists, strings,
numbers): a file that asks for any class is refused, so a hostile file runs nothing. Each
rank's line is where it called its oldest collective that did not complete (the dump's
Python frames of that entry), its rank the number its file name ends with.
"""

from __future__ import annotations

import io
import json
import pickle
import re
from pathlib import Path
from typing import Any

from dpwise.watch.state import Collective, Frame, RankState

_RANK = re.compile(r"(\d+)(\.\w+)?$")
_MAX_BYTES = 256 * 1024 * 1024  # a dump larger than this is not read


class _PlainUnpickler(pickle.Unpickler):
    """Builds plain values only: any class a pickle names is refused."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"it asks for {module}.{name}")


def _load(path: Path) -> Any:
    """The file's content: JSON, or a pickle of plain values; None when it is neither."""
    if path.stat().st_size > _MAX_BYTES:
        return None
    raw = path.read_bytes()
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, ValueError):
        pass
    try:
        return _PlainUnpickler(io.BytesIO(raw)).load()
    except Exception:  # any malformed or hostile pickle is simply not a dump
        return None


def is_dump(doc: Any) -> bool:
    return isinstance(doc, dict) and isinstance(doc.get("entries"), list) and "pg_config" in doc


def rank_of(path: Path) -> int | None:
    """The rank a dump's file name ends with (nccl_trace_rank_3 → 3), or its folder's."""
    for part in (path.name, path.parent.name):
        found = _RANK.search(part)
        if found:
            return int(found.group(1))
    return None


def from_dump(doc: dict[str, Any], rank: int) -> RankState:
    """A Flight Recorder dump as a rank's state: its collectives, and the frames of the oldest
    one that did not complete as its stack."""
    entries = [e for e in doc["entries"] if isinstance(e, dict) and not e.get("is_p2p")]
    collectives = tuple(
        Collective(
            seq=int(e.get("collective_seq_id", 0)),
            op=str(e.get("profiling_name", "")).split(":")[-1],
            sizes=tuple(tuple(int(n) for n in s) for s in e.get("input_sizes") or []),
            done=bool(e.get("retired")) or e.get("state") == "completed",
            created_ns=int(e.get("time_created_ns", 0)),
            group=str((e.get("process_group") or [""])[0]),
        )
        for e in entries
    )
    pending = next((e for e in entries if not (e.get("retired") or e.get("state") == "completed")),
                   None)  # fmt: skip
    frames = (pending or {}).get("frames") or []  # where it is is known only inside a collective
    stack = tuple(
        Frame(str(f.get("filename", "")), int(f.get("line", 0)), str(f.get("name", "")))
        for f in reversed(frames)
        if isinstance(f, dict)
    )
    newest = max((c.created_ns for c in collectives), default=0)
    return RankState(rank, 0, newest / 1e9, 0, 0, collectives, stack, None)


def error_file(doc: Any) -> str | None:
    """What a rank raised, from torchelastic's error file ({"message": {"message": …}})."""
    if not isinstance(doc, dict) or "message" not in doc:
        return None
    message = doc["message"]
    if isinstance(message, dict):
        message = message.get("message", "")
    return f"raised {str(message).strip().splitlines()[0]}" if str(message).strip() else None


def read(folder: Path) -> tuple[list[RankState], dict[int, str]]:
    """The Flight Recorder dumps and torchelastic error files in ``folder`` (and one level
    below), as states and ended ranks."""
    states: dict[int, RankState] = {}
    ended: dict[int, str] = {}
    for path in sorted([*folder.iterdir(), *folder.glob("*/*")]):
        if not path.is_file():
            continue
        doc = _load(path)
        rank = rank_of(path)
        if rank is None:
            continue
        if is_dump(doc):
            states[rank] = from_dump(doc, rank)
        elif (said := error_file(doc)) is not None:
            ended[rank] = said
    return [states[r] for r in sorted(states)], ended
