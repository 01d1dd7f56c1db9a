"""`dpwise lint`: arguments and the command (the only place that prints)."""

from __future__ import annotations

import argparse
import sys

from dpwise.errors import DpwiseError
from dpwise.lint.checker import lint_paths
from dpwise.lint.diagnostics import FORMATS, render
from dpwise.lint.model import Rule
from dpwise.lint.rules import RULES, find_rule, selected

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

Files over 1 MiB, and files nested too deeply to parse, are reported as file-not-checked (DPW016)
and not checked; FIFOs, sockets and devices inside folders are skipped (named on stderr).
Suppress one line with `# dpwise: noqa` (every rule) or `# dpwise: noqa: DPW008,missing-set-epoch`.
Exit code: 0 when clean, 1 when anything is found, 2 on a usage error or an unreadable path.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths", nargs="*", metavar="PATH", help="files or folders (*.py, recursive)"
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="full", help="output format (default: full)"
    )
    parser.add_argument(
        "--select",
        action="append",
        metavar="RULES",
        help="only these rules: comma-separated codes or names (ALL = every rule)",
    )
    parser.add_argument(
        "--ignore", action="append", metavar="RULES", help="skip these rules (codes or names)"
    )
    parser.add_argument("--explain", metavar="RULE", help="print a rule's documentation and exit")
    parser.add_argument("--list-rules", action="store_true", help="list every rule and exit")


def explain(token: str) -> str:
    rule = find_rule(token)
    if rule is None:
        raise DpwiseError(
            f"--explain: unknown rule {token!r}; see 'dpwise lint --list-rules' for codes and names"
        )
    title = f"# {rule.name} ({rule.code})"
    return f"{title}\n\nSeverity: {rule.severity}\n\n{rule.summary}.\n\n{rule.docs.rstrip()}\n"


def rule_table(rules: tuple[Rule, ...] = RULES) -> str:
    width = max(len(r.name) for r in rules)
    lines = [f"{r.code}  {r.name:<{width}}  {r.severity:<7}  {r.summary}" for r in rules]
    return "\n".join(lines) + "\n"


def run(args: argparse.Namespace) -> int:
    """`dpwise lint`: 0 when clean, 1 when anything is found. Usage errors and unreadable paths
    raise DpwiseError, which the main CLI reports on one line with exit code 2."""
    if args.explain:
        sys.stdout.write(explain(args.explain))
        return 0
    if args.list_rules:
        sys.stdout.write(rule_table())
        return 0
    if not args.paths:
        raise DpwiseError(
            "dpwise lint needs at least one PATH (a file or folder), e.g. 'dpwise lint train.py'"
        )
    skipped: list[str] = []
    findings = lint_paths(args.paths, select=args.select, ignore=args.ignore, skipped=skipped)
    if skipped:
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        shown = ", ".join(skipped[:3]) + more
        print(f"dpwise lint: skipped {shown}: not a regular file", file=sys.stderr)
    from dpwise import __version__

    rules = selected(args.select, args.ignore)
    sys.stdout.write(render(findings, args.format, rules, __version__))
    return 1 if findings else 0
