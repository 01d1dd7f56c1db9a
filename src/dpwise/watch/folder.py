"""The folder a watch leaves and `dpwise diagnose` reads: each rank's last state as its watcher
wrote it (`rank<R>.json`: its collectives, stack, steps), the ranks the launcher saw end
(`ended.json`), what was said before a hang (`before.json`), and the diagnosis
(`diagnosis.json`, `diagnosis.txt`)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.watch.state import RankState

STATE = re.compile(r"rank(\d+)\.json$")
ENDED = "ended.json"
BEFORE = "before.json"  # what was said before a hang: unequal batch counts, a straggler
DIAGNOSIS = "diagnosis"


def states(folder: Path) -> list[RankState]:
    """Every rank's last state in ``folder``, rank order; a state being replaced is skipped."""
    found = []
    for path in sorted(folder.glob("rank*.json")):
        if STATE.search(path.name):
            try:
                found.append(RankState.from_json(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, KeyError, TypeError):
                continue
    return sorted(found, key=lambda s: s.rank)


def read(folder: Path) -> tuple[list[RankState], dict[int, str]]:
    """What `dpwise diagnose DIR` reads: the states and the ended ranks, each file checked; a
    folder without states, or a state that does not read, is one line."""
    if not folder.is_dir():
        raise DpwiseError(f"{folder} is not a folder: give the --out folder of a dpwise watch")
    paths = [p for p in sorted(folder.glob("rank*.json")) if STATE.search(p.name)]
    if not paths:
        from dpwise.watch import dumps, ncclog

        found, ended = dumps.read(folder)
        if found:
            return found, ended
        logged = ncclog.read(folder)
        if logged:
            return logged, ended
        raise DpwiseError(
            f"{folder} holds no rank<R>.json, no Flight Recorder dump and no log with NCCL's "
            "watchdog lines: give the --out folder of a dpwise watch, the folder of the dumps "
            "(TORCH_NCCL_DEBUG_INFO_TEMP_FILE) or of the job's logs"
        )
    found = []
    for path in paths:
        try:
            found.append(RankState.from_json(json.loads(path.read_text(encoding="utf-8"))))
        except (ValueError, KeyError, TypeError) as exc:
            raise DpwiseError(
                f"{path} is not a rank's state as dpwise watch writes it ({_why(exc)}): it is "
                "truncated or not dpwise's"
            ) from None
    return sorted(found, key=lambda s: s.rank), _ended(folder)


def _why(exc: Exception) -> str:
    return f"no {exc}" if isinstance(exc, KeyError) else type(exc).__name__


def _ended(folder: Path) -> dict[int, str]:
    path = folder / ENDED
    if not path.exists():
        return {}
    try:
        raw: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return {int(rank): str(how) for rank, how in raw.items()}
    except (ValueError, TypeError, AttributeError):
        raise DpwiseError(f"{path} does not read as JSON of rank: how it ended") from None


def write_ended(folder: Path, ended: dict[int, str]) -> None:
    (folder / ENDED).write_text(json.dumps({str(r): how for r, how in ended.items()}) + "\n")


def write_before(folder: Path, said: dict[str, Any]) -> None:
    (folder / BEFORE).write_text(json.dumps(said, indent=2) + "\n", encoding="utf-8")


def write_diagnosis(folder: Path, doc: dict[str, Any], text: str) -> None:
    (folder / f"{DIAGNOSIS}.json").write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    (folder / f"{DIAGNOSIS}.txt").write_text(text + "\n", encoding="utf-8")


def clear(folder: Path) -> None:
    """A watch's own files from an earlier watch in ``folder`` (another job's states would be
    read as this one's); nothing else in it is touched."""
    for path in folder.glob("rank*.json"):
        if STATE.search(path.name):
            path.unlink()
    for name in (ENDED, BEFORE, f"{DIAGNOSIS}.json", f"{DIAGNOSIS}.txt"):
        (folder / name).unlink(missing_ok=True)
