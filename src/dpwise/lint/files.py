"""Which files to check, reading them, and `# dpwise: noqa` comments."""

from __future__ import annotations

import io
import os
import re
import tokenize
from collections.abc import Iterable

from dpwise.errors import DpwiseError
from dpwise.infra import userfile

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

MAX_FILE_BYTES = (
    userfile.MAX_BYTES
)  # 1 MiB: a larger file is reported (file-not-checked), not parsed


class TooLarge(Exception):
    """A file over MAX_FILE_BYTES: reported, not read further."""


Noqa = dict[int, frozenset[str] | None]  # line -> codes/names (lower case), None = every rule


def discover(paths: Iterable[str], skipped: list[str] | None = None) -> list[str]:
    """Files to check: each file given, and every `*.py` under each folder given (sorted,
    skipping VCS, virtual-environment and cache folders). A missing path, or one given by name
    that is not a regular file (a FIFO, socket or device: reading it could block forever), is a
    usage error; such files met inside a folder are skipped and appended to ``skipped``. A file
    met under two names (a symbolic link beside it) is checked once, under the first."""
    found: dict[str, str] = {}  # the file itself -> the first name it was met under
    for path in paths:
        if os.path.isfile(path):
            found.setdefault(os.path.realpath(path), path)
        elif os.path.isdir(path):
            for file in _walk(path, skipped if skipped is not None else []):
                found.setdefault(os.path.realpath(file), file)
        elif os.path.exists(path):
            raise DpwiseError(
                f"{path}: not a regular file (a FIFO, socket or device); give files or folders"
            )
        else:
            raise DpwiseError(f"{path}: no such file or folder")
    return list(found.values())


def _walk(root: str, skipped: list[str]) -> list[str]:
    files: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            (files if os.path.isfile(path) else skipped).append(path)  # isfile: regular only
    return files


def read_source(path: str) -> str:
    """The file's text, decoded as Python does (PEP 263 cookie, BOM, UTF-8 by default).
    Raises UnicodeDecodeError / SyntaxError for undecodable bytes, TooLarge over
    MAX_FILE_BYTES, DpwiseError if unreadable or not a regular file."""
    return read_with_encoding(path)[0]


def read_with_encoding(path: str) -> tuple[str, str]:
    """(text, encoding): the encoding to write the text back with (`utf-8-sig` keeps a BOM).
    Line endings are left as they are."""
    text, encoding, _ = read_for_fix(path)
    return text, encoding


def read_for_fix(path: str) -> tuple[str, str, userfile.Stamp]:
    """(text, encoding, stamp): the stamp lets a fix be written back only if the file is still
    what was read (``userfile.replace``)."""
    try:
        data, stamp = userfile.read(path, MAX_FILE_BYTES)
    except userfile.TooLarge as exc:
        raise TooLarge(exc.size) from None
    except OSError as exc:
        raise DpwiseError(f"{path}: cannot read ({exc.strerror or exc})") from exc
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    return text.removeprefix("\ufeff"), encoding, stamp


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
