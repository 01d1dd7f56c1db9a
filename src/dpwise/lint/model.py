"""The nouns of `dpwise lint`: a rule's metadata, a rule's hit and a reported finding."""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


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
        }
