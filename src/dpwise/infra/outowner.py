"""Whose results an --out holds: every command that writes results refuses a place that holds
another command's, in one line, before anything is written.

A folder says which command wrote it by the files in it. ``results.json`` names its command
(``"command": "dpwise compare …"``, ``"dpwise tune …"``; a file without that key is known by its
keys); a stopped search leaves tune's journal (``.search/journal.json``); ``final.pt``,
``metrics.json`` and ``checkpoint.pt`` are train's. probe-link writes one file, and refuses a file
that is another command's.
"""

from __future__ import annotations

import json
from pathlib import Path

from dpwise.errors import DpwiseError

COMPARE, TUNE, TRAIN, PROBE_LINK = "compare", "tune", "train", "probe-link"
UNKNOWN = ""  # a results.json that no dpwise command wrote (or that cannot be read)
RESULTS = "results.json"
REPORTS = ("report.html", "report.md")
TRAIN_FILES = ("final.pt", "metrics.json", "checkpoint.pt")
JOURNAL = ".search/journal.json"
_READ_LIMIT = 64 * 2**20  # a results.json larger than this is not read: it is not ours to judge

# A document of each command by the keys it always had, for a file without "command"
_SHAPES = (
    (TUNE, {"winner", "candidates", "default"}),
    (COMPARE, {"runs", "checks", "recommendation"}),
    (TRAIN, {"global_steps", "losses", "strategy", "world_size"}),
    (PROBE_LINK, {"ops", "min_bytes", "max_bytes", "world_size"}),
)


def owner(out: Path) -> str | None:
    """The command whose results ``out`` holds; UNKNOWN for a results.json that no dpwise command
    wrote; None for a folder that holds no command's results (or does not exist)."""
    if (out / RESULTS).is_file():
        found = writer(out / RESULTS)
        return UNKNOWN if found is None else found
    if (out / JOURNAL).is_file():
        return TUNE
    if any((out / name).is_file() for name in TRAIN_FILES):
        return TRAIN
    return None


def writer(path: Path) -> str | None:
    """The command that wrote the JSON document at ``path``; None when no dpwise command did."""
    try:
        if path.stat().st_size > _READ_LIMIT:
            return None
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    words = str(doc.get("command") or "").split()
    if len(words) >= 2 and words[0] == "dpwise" and words[1] in (COMPARE, TUNE):
        return words[1]
    return next((name for name, keys in _SHAPES if keys <= doc.keys()), None)


def check(out: Path, command: str, overwrite: bool = False) -> str | None:
    """Refuse ``out`` (one line) when it holds another command's results; ``overwrite``: the
    command replaces a results.json of another command when told to (tune's --overwrite), and
    this returns whose it replaces. None when ``out`` is the command's own or holds no results."""
    other = owner(out)
    if other is None or other == command:
        return None
    if overwrite and other != TRAIN:  # a trained model is never another command's to delete
        return other
    offer = " or --overwrite to replace them" if command == TUNE and other != TRAIN else ""
    raise DpwiseError(
        f"--out {out} holds {_whose(other)} ({', '.join(present(out, other))}); "
        f"give {command} another --out{offer}"
    )


def check_file(path: Path, command: str) -> None:
    """Refuse to write the file ``path`` over another command's file (probe-link's --out)."""
    if not path.is_file():
        return
    if path.name in REPORTS:
        other = owner(path.parent)
    elif path.suffix == ".pt":
        other = TRAIN if path.name in TRAIN_FILES else None
    else:
        other = writer(path)
    if other is None or other in (UNKNOWN, command):
        return
    raise DpwiseError(f"--out {path} is one of {_whose(other)}; give {command} another file")


def present(out: Path, other: str) -> list[str]:
    """The files of ``other``'s results that ``out`` holds, by name."""
    names = {
        TRAIN: TRAIN_FILES,
        TUNE: (RESULTS, *REPORTS, JOURNAL),
        COMPARE: (RESULTS, *REPORTS),
    }.get(other, (RESULTS,))
    return [name for name in names if (out / name).is_file()]


def _whose(other: str) -> str:
    if other == UNKNOWN:
        return "a results.json that no dpwise command wrote"
    return f"dpwise {other}'s results"
