"""`dpwise lint`: find data-parallel pitfalls in training scripts, statically.

The checked code is parsed with `ast`, never imported or run. Library use:

    from dpwise.lint import lint_paths
    findings = lint_paths(["train.py"], select=["DPW004", "missing-set-epoch"])

CLI wiring: `dpwise.lint.command` has HELP, DESCRIPTION, EPILOG, `add_arguments(parser)` and
`run(args) -> int`, the shape of a `dpwise.commands` module.
"""

from __future__ import annotations

from dpwise.lint.checker import lint_paths, lint_source
from dpwise.lint.command import add_arguments, run
from dpwise.lint.model import Finding, Rule
from dpwise.lint.rules import RULES, find_rule

__all__ = [
    "RULES",
    "Finding",
    "Rule",
    "add_arguments",
    "find_rule",
    "lint_paths",
    "lint_source",
    "run",
]
