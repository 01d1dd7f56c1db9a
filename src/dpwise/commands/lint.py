"""`dpwise lint`: find data-parallel pitfalls in training scripts, statically (see dpwise.lint)."""

from __future__ import annotations

import argparse

from dpwise.infra.settings import add_settings, from_args
from dpwise.lint.settings import LintConfig

HELP = "find data-parallel pitfalls in training scripts, statically"
DESCRIPTION = (
    "Check training scripts for data-parallel pitfalls (DataParallel, DDP set-up, samplers, "
    "rank-0 writes, AMP, checkpoints), the way Ruff reports Python mistakes. The code is parsed "
    "with ast, never imported or run."
)
EPILOG = """\
examples:
  dpwise lint train.py                          # every rule, with source lines and help
  dpwise lint src/ scripts/ --format concise    # path:line:col: CODE [name] message
  dpwise lint train.py --select DPW004,missing-set-epoch
  dpwise lint . --ignore batchnorm-without-sync --format sarif > dpwise.sarif
  dpwise lint --explain missing-set-epoch       # what a rule flags, why, and the fix
  dpwise lint train.py --diff                   # the safe fixes as a diff; nothing is written
  dpwise lint train.py --fix --show-fixes       # apply the safe fixes, list what changed
  dpwise lint train.py --fix --unsafe-fixes     # also the fixes that change behaviour

Fixes, as in Ruff: a safe fix keeps the program's behaviour (`deprecated-amp-api`,
`shuffle-with-sampler`); an unsafe fix changes it on purpose and wants a review
(`missing-set-epoch`, `wrapped-state-dict`, ...): it is applied only with --unsafe-fixes.
`--list-rules` marks the rules that can fix; JSON and SARIF output carry every fix's edits.
Comments and formatting outside an edit are kept byte for byte; a fixed file is checked to parse
before it is written (atomically, keeping its encoding, line endings and permissions).

Files over 1 MiB, and files nested too deeply to parse, are reported as file-not-checked (DPW016)
and not checked; FIFOs, sockets and devices inside folders are skipped (named on stderr).
Suppress one line with `# dpwise: noqa` (every rule) or `# dpwise: noqa: DPW008,missing-set-epoch`.
Exit code: 0 when clean, 1 when anything is found (with --fix: anything left; with --diff: any
fix to apply), 2 on a usage error, an unreadable path or a file that cannot be written.
"""


CHECKING = ("format", "select", "ignore", "explain", "list_rules")
FIXES = ("fix", "unsafe_fixes", "diff", "show_fixes")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of LintConfig's settings (defaults and help live on its fields), in groups."""
    add_settings(parser, LintConfig, ("paths", *CHECKING))
    add_settings(parser.add_argument_group("fixes"), LintConfig, FIXES)


def run(args: argparse.Namespace) -> int:
    from dpwise.lint.session import run_lint

    return run_lint(from_args(LintConfig, args))
