"""Owns: `dpwise lint`: the static analysis (analysis/), the rules and their code table (rules/),
the fixes (fix/, fixer.py), the formats and the run.
May import: infra, errors (never torch: the checked code is parsed, not run)
Imported by: commands, migrate, userscript, watch

`dpwise lint`: find data-parallel pitfalls in training scripts, statically.

The checked code is parsed with `ast`, never imported or run. Library use:

    from dpwise.lint import lint_paths
    findings = lint_paths(["train.py"], select=["DPW004", "missing-set-epoch"])

The command's run is `dpwise.lint.session.run_lint(LintConfig)`; its flags are LintConfig's
settings (`dpwise.lint.settings`).
"""

from __future__ import annotations

from dpwise.lint.checker import lint_paths, lint_source
from dpwise.lint.model import Finding, Rule
from dpwise.lint.rules import RULES, find_rule

__all__ = [
    "RULES",
    "Finding",
    "Rule",
    "find_rule",
    "lint_paths",
    "lint_source",
]
