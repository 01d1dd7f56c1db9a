"""LintConfig: what `dpwise lint` checks and how it reports and fixes. Each field is a setting
(dpwise.infra.settings): its flag, help and checks are declared here once."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra.settings import setting, validate
from dpwise.lint.diagnostics import FORMATS


def _strings(raw: Any, flag: str) -> tuple[str, ...]:
    return tuple(raw)


def _rules(help: str) -> Any:
    """A repeatable list of rule codes or names (``--select DPW004,missing-set-epoch``)."""
    return setting(None, parse=_strings, action="append", metavar="RULES", help=help)


@dataclass(frozen=True, kw_only=True)
class LintConfig:
    paths: tuple[str, ...] = setting(
        factory=tuple,
        flag="paths",
        parse=_strings,
        nargs="*",
        metavar="PATH",
        help="files or folders (*.py, recursive)",
    )
    format: str = setting("full", choices=FORMATS, help="output format (default: full)")
    select: tuple[str, ...] | None = _rules(
        "only these rules: comma-separated codes or names (ALL = every rule)"
    )
    ignore: tuple[str, ...] | None = _rules("skip these rules (codes or names)")
    explain: str | None = setting(
        None, metavar="RULE", help="print a rule's documentation and exit"
    )
    list_rules: bool = setting(False, action="store_true", help="list every rule and exit")
    fix: bool = setting(
        False, action="store_true", help="apply the safe fixes to the files, then report the rest"
    )
    unsafe_fixes: bool = setting(
        False,
        action="store_true",
        help="with --fix or --diff, also apply the fixes that change behaviour (review them)",
    )
    diff: bool = setting(
        False, action="store_true", help="print the fixes as a unified diff and write nothing"
    )
    show_fixes: bool = setting(
        False,
        action="store_true",
        help="list the fixes applied (with --fix) or available, per file and rule",
    )

    def __post_init__(self) -> None:
        validate(self)
        if not (self.explain or self.list_rules or self.paths):
            raise DpwiseError(
                "dpwise lint needs at least one PATH (a file or folder), "
                "e.g. 'dpwise lint train.py'"
            )
