"""A file's text in Ruff's coordinates: where an ast node is, edits on it, and applying fixes.

ast reports lines as the parser counts them (`\\n`, `\\r\\n` and `\\r` end a line; a form feed
does not) and columns as UTF-8 byte offsets; edits use 1-based lines and character columns, like
Ruff's JSON. Everything outside an edit is kept byte for byte, line endings included.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence

from dpwise.lint.model import Edit, Fix

_NEWLINE = re.compile(r"\r\n|\r|\n")


def split_lines(source: str) -> list[str]:
    """The lines as the parser numbers them, without their line endings."""
    return _NEWLINE.split(source)


def column(line: str, byte_offset: int) -> int:
    """ast's UTF-8 byte offset -> 1-based character column."""
    if line.isascii():
        return byte_offset + 1
    return len(line.encode("utf-8")[:byte_offset].decode("utf-8", errors="replace")) + 1


class Text:
    """A source file's text with the offsets of its lines."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.lines = split_lines(source)
        self.starts = [0]
        for match in _NEWLINE.finditer(source):
            self.starts.append(match.end())
        first = _NEWLINE.search(source)
        self.newline = first.group() if first else "\n"

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col - 1

    def start(self, node: ast.AST) -> tuple[int, int]:
        line = node.lineno  # type: ignore[attr-defined]  # a node edited has a position (ast.AST's stub declares none)
        return line, column(self.lines[line - 1], node.col_offset)  # type: ignore[attr-defined]  # as above

    def end(self, node: ast.AST) -> tuple[int, int]:
        line = node.end_lineno  # type: ignore[attr-defined]  # as above
        return line, column(self.lines[line - 1], node.end_col_offset)  # type: ignore[attr-defined]  # as above

    def segment(self, node: ast.AST) -> str:
        return self.source[self.offset(*self.start(node)) : self.offset(*self.end(node))]

    def replace(self, node: ast.AST, content: str) -> Edit:
        return Edit(*self.start(node), *self.end(node), content)

    def indent(self, stmt: ast.stmt) -> str | None:
        """The whitespace before a statement that starts its line; None after `;` or `:`."""
        line, col = self.start(stmt)
        before = self.lines[line - 1][: col - 1]
        return before if not before.strip() else None

    def insert_before(self, stmt: ast.stmt, code: Sequence[str]) -> Edit | None:
        """Lines of code inserted above a statement that starts its line, at its indentation."""
        indent = self.indent(stmt)
        if indent is None:
            return None
        text = "".join(f"{indent}{line}{self.newline}" for line in code)
        return Edit(stmt.lineno, 1, stmt.lineno, 1, text)

    def insert_after(self, stmt: ast.stmt, code: Sequence[str], indent: str) -> Edit | None:
        """Lines of code below a statement (at `indent`), which must end its line."""
        line, col = self.end(stmt)
        rest = self.lines[line - 1][col - 1 :]
        if rest.strip() and not rest.strip().startswith("#"):
            return None
        at = len(self.lines[line - 1]) + 1
        text = "".join(f"{self.newline}{indent}{c}" for c in code)
        return Edit(line, at, line, at, text)


def apply(source: str, fixes: Iterable[Fix]) -> tuple[str, list[Fix]]:
    """Apply the fixes whose edits do not touch an earlier fix's edits (in source order); the
    rest wait for the next round, after the file is checked again. Identical fixes (one fix
    that settles several findings) count once."""
    text = Text(source)
    taken: list[tuple[int, int]] = []
    applied: list[Fix] = []
    chosen: list[tuple[int, int, str]] = []
    for fix in sorted(dict.fromkeys(fixes), key=lambda f: min(f.edits)):
        spans = [
            (text.offset(e.line, e.col), text.offset(e.end_line, e.end_col)) for e in fix.edits
        ]
        if any(a <= d and c <= b for a, b in spans for c, d in taken):
            continue
        if any(a <= d and c <= b for i, (a, b) in enumerate(spans) for c, d in spans[i + 1 :]):
            continue  # a fix whose own edits overlap is a bug in its rule: never applied
        taken += spans
        applied.append(fix)
        chosen += [(a, b, e.content) for (a, b), e in zip(spans, fix.edits, strict=True)]
    out = source
    for start, end, content in sorted(chosen, reverse=True):
        out = out[:start] + content + out[end:]
    return out, applied
