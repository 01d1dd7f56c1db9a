"""Which files to check, reading them, and `# dpwise: noqa` comments."""

from __future__ import annotations

import io
import os
import re
import tokenize
from collections.abc import Iterable

from dpwise.errors import DpwiseError

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".eggs",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        "__pycache__",
        "__pypackages__",
        "node_modules",
        "site-packages",
    }
)
_NOQA = re.compile(r"#\s*dpwise:\s*noqa(?::\s*(?P<codes>[\w-]+(?:\s*,\s*[\w-]+)*))?", re.I)

Noqa = dict[int, frozenset[str] | None]  # line -> codes/names (lower case), None = every rule


def discover(paths: Iterable[str]) -> list[str]:
    """Files to check: each file given, and every `*.py` under each folder given (sorted,
    skipping VCS, virtual-environment and cache folders). A missing path is a usage error."""
    found: dict[str, None] = {}
    for path in paths:
        if os.path.isfile(path):
            found[path] = None
        elif os.path.isdir(path):
            for file in _walk(path):
                found[file] = None
        else:
            raise DpwiseError(f"{path}: no such file or folder")
    return list(found)


def _walk(root: str) -> list[str]:
    files: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".py")]
    return files


def read_source(path: str) -> str:
    """The file's text, decoded as Python does (PEP 263 cookie, BOM, UTF-8 by default).
    Raises UnicodeDecodeError / SyntaxError for undecodable bytes; DpwiseError if unreadable."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise DpwiseError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.removeprefix("\ufeff")


def noqa_lines(source: str) -> Noqa:
    """Lines that carry `# dpwise: noqa` (every rule) or `# dpwise: noqa: CODE[,NAME...]`."""
    table: Noqa = {}
    if "noqa" not in source:
        return table
    for number, line in enumerate(source.splitlines(), start=1):
        if "noqa" not in line:
            continue
        match = _NOQA.search(line)
        if match is None:
            continue
        codes = match.group("codes")
        table[number] = (
            None if codes is None else frozenset(c.strip().lower() for c in codes.split(","))
        )
    return table


def suppressed(noqa: Noqa, line: int, code: str, name: str) -> bool:
    if line not in noqa:
        return False
    codes = noqa[line]
    return codes is None or code.lower() in codes or name in codes
