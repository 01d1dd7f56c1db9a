"""The nouns of `dpwise lint`: a rule's metadata, a rule's hit, a fix and a reported finding."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}
# Ruff's applicability levels: a safe fix keeps the program's behaviour; an unsafe fix changes
# it on purpose (that is the point of the rule) and wants a person's review.
SAFE, UNSAFE, NO_FIX = "safe", "unsafe", "none"


@dataclass(frozen=True, kw_only=True)
class Rule:
    """A lint rule's stable identity and documentation (the checker lives beside it)."""

    code: str
    name: str
    severity: str
    summary: str
    message: str
    help: str
    docs: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"rule {self.code}: severity {self.severity!r} not in {SEVERITIES}")


@dataclass(frozen=True)
class Hit:
    """What a rule's check yields: where, and optionally a message or help more precise
    than the rule's defaults."""

    node: ast.AST
    message: str | None = None
    help: str | None = None
    data: Any = field(default=None, compare=False)  # what the rule's fixer needs to know


@dataclass(frozen=True, order=True)
class Edit:
    """Replace the text from (line, col) up to, not including, (end_line, end_col) with
    `content`. Lines and columns are 1-based, columns count characters (Ruff's convention); an
    insertion has start == end, a deletion has empty content."""

    line: int
    col: int
    end_line: int
    end_col: int
    content: str

    def to_dict(self) -> dict[str, object]:
        return {
            "content": self.content,
            "location": {"row": self.line, "column": self.col},
            "end_location": {"row": self.end_line, "column": self.end_col},
        }


@dataclass(frozen=True)
class Fix:
    """A finding's fix: edits that are applied together, or not at all."""

    applicability: str  # SAFE or UNSAFE
    message: str
    edits: tuple[Edit, ...]

    def __post_init__(self) -> None:
        if self.applicability not in (SAFE, UNSAFE) or not self.edits:
            raise ValueError(f"a fix needs edits and an applicability of {SAFE!r} or {UNSAFE!r}")

    def to_dict(self) -> dict[str, object]:
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [e.to_dict() for e in sorted(self.edits)],
        }


@dataclass(frozen=True, kw_only=True, order=True)
class Finding:
    """One reported problem. Lines and columns are 1-based, as in Ruff."""

    path: str
    line: int
    col: int
    code: str
    name: str = field(compare=False)
    severity: str = field(compare=False)
    message: str = field(compare=False)
    help: str = field(compare=False)
    end_line: int = field(default=0, compare=False)
    end_col: int = field(default=0, compare=False)
    source_line: str = field(default="", compare=False, repr=False)
    fix: Fix | None = field(default=None, compare=False, repr=False)

    def at_least(self, severity: str) -> bool:
        return SEVERITY_RANK[self.severity] >= SEVERITY_RANK[severity]

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "message": self.message,
            "help": self.help,
            "fix_applicability": self.fix.applicability if self.fix else NO_FIX,
            "fix": self.fix.to_dict() if self.fix else None,
        }
