"""`dpwise lint`: arguments and the command (the only place that prints)."""

from __future__ import annotations

import argparse
import sys

from dpwise.errors import DpwiseError
from dpwise.lint import files
from dpwise.lint.analysis.project import Project
from dpwise.lint.checker import lint_paths
from dpwise.lint.diagnostics import FORMATS, Fixing, plural, render, render_fixed
from dpwise.lint.fix import fixer
from dpwise.lint.model import Finding, Rule
from dpwise.lint.rules import FIXERS, RULES, find_rule, selected

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
    fixes = parser.add_argument_group("fixes")
    fixes.add_argument(
        "--fix", action="store_true", help="apply the safe fixes to the files, then report the rest"
    )
    fixes.add_argument(
        "--unsafe-fixes",
        action="store_true",
        help="with --fix or --diff, also apply the fixes that change behaviour (review them)",
    )
    fixes.add_argument(
        "--diff",
        action="store_true",
        help="print the fixes as a unified diff and write nothing",
    )
    fixes.add_argument(
        "--show-fixes",
        action="store_true",
        help="list the fixes applied (with --fix) or available, per file and rule",
    )


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
    lines = [
        f"{r.code}  {r.name:<{width}}  {r.severity:<7}  {'fix' if r.code in FIXERS else '   '}  "
        f"{r.summary}"
        for r in rules
    ]
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
    if args.fix or args.diff:
        return run_fixes(args)
    skipped: list[str] = []
    findings = lint_paths(
        args.paths, select=args.select, ignore=args.ignore, skipped=skipped, fixes=True
    )
    _say_skipped(skipped)
    fixing = Fixing(unsafe=args.unsafe_fixes)
    _report(args, findings, fixing)
    if args.show_fixes:
        would = [f for f in findings if fixer.wanted(f, args.unsafe_fixes)]
        _aside(args, render_fixed(would, done=False))
    return 1 if findings else 0


def _say_skipped(skipped: list[str]) -> None:
    if skipped:
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        shown = ", ".join(skipped[:3]) + more
        print(f"dpwise lint: skipped {shown}: not a regular file", file=sys.stderr)


def _report(args: argparse.Namespace, findings: list[Finding], fixing: Fixing) -> None:
    from dpwise import __version__

    rules = selected(args.select, args.ignore)
    sys.stdout.write(render(findings, args.format, rules, __version__, fixing))


def _aside(args: argparse.Namespace, text: str) -> None:
    """Text beside the report: after it, or on stderr when stdout is JSON or SARIF."""
    (sys.stderr if args.format in ("json", "sarif") else sys.stdout).write(text)


def run_fixes(args: argparse.Namespace) -> int:
    """--fix / --diff: fix each file in memory; --diff prints, --fix writes and reports the rest.
    A file that cannot be written is named on stderr (the others are still fixed); exit 2."""
    rules = selected(args.select, args.ignore)
    skipped: list[str] = []
    paths = files.discover(args.paths, skipped)
    _say_skipped(skipped)
    project = Project()
    results = [fixer.fix_file(path, rules, project, args.unsafe_fixes) for path in paths]
    for result in results:
        if result is not None and result.broken:
            print(
                f"dpwise lint: a fix made {result.path} unparsable; the file is left as it was "
                "(please report this with the file)",
                file=sys.stderr,
            )
    done = [r for r in results if r is not None]
    fixed = [f for r in done for f in r.fixed]
    if args.diff:
        return _show_diff(args, done, fixed)
    failed = _write_all([r for r in done if r.changed])
    written = {r.path for r in done if r.changed and r.path not in failed}
    fixed = [f for f in fixed if f.path in written]
    remaining = _left(args, paths, results, failed)
    _report(args, remaining, Fixing(unsafe=args.unsafe_fixes, fixed=len(fixed)))
    if args.show_fixes:
        _aside(args, render_fixed(fixed, done=True))
    if failed:
        return 2
    return 1 if remaining else 0


def _left(
    args: argparse.Namespace, paths: list[str], results: list[fixer.Fixed | None], failed: set[str]
) -> list[Finding]:
    """What is left after --fix: each fixed file's findings, as its fix loop last checked its
    text; a file that was not read as Python text, or could not be written, is checked as it is
    on disk."""
    left: list[Finding] = []
    for path, result in zip(paths, results, strict=True):
        if result is None or path in failed:
            left += lint_paths([path], select=args.select, ignore=args.ignore, fixes=True)
        else:
            left += result.remaining
    return sorted(left)


def _show_diff(args: argparse.Namespace, done: list[fixer.Fixed], fixed: list[Finding]) -> int:
    for result in done:
        if result.changed:
            sys.stdout.write(result.diff())
    if args.show_fixes:
        sys.stderr.write(render_fixed(fixed, done=False))
    hidden = 0
    if not args.unsafe_fixes:
        hidden = sum(1 for r in done for f in r.remaining if f.fix and not fixer.wanted(f, False))
    more = f" ({hidden} more with `--unsafe-fixes`)" if hidden else ""
    print(
        f"Would fix {plural(len(fixed))}{more}." if fixed else f"No fixes available{more}.",
        file=sys.stderr,
    )
    return 1 if fixed else 0


def _write_all(changed: list[fixer.Fixed]) -> set[str]:
    failed: set[str] = set()
    for result in changed:
        try:
            fixer.write(result)
        except DpwiseError as exc:
            print(f"dpwise lint: {exc}", file=sys.stderr)
            failed.add(result.path)
    return failed
