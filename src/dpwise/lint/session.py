"""`dpwise lint`'s run: explain a rule, list the rules, report the findings, or fix and report
what is left. The one place lint prints; the formats are diagnostics.py's."""

from __future__ import annotations

import sys
from pathlib import Path

from dpwise.errors import DpwiseError
from dpwise.lint import files, fixer, reach
from dpwise.lint.analysis.project import Project
from dpwise.lint.checker import lint_paths
from dpwise.lint.diagnostics import Fixing, plural, render, render_fixed
from dpwise.lint.model import Finding, Rule
from dpwise.lint.rules import FIXERS, RULES, find_rule, selected
from dpwise.lint.settings import LintConfig


def explain(token: str) -> str:
    rule = find_rule(token)
    if rule is None:
        raise DpwiseError(
            f"--explain: unknown rule {token!r}; see 'dpwise lint --list-rules' for codes and names"
        )
    title = f"# {rule.name} ({rule.code})"
    docs = f"{rule.docs.rstrip()}\n\n{reach.section(rule.name)}"
    return f"{title}\n\nSeverity: {rule.severity}\n\n{rule.summary}.\n\n{docs}"


def rule_table(rules: tuple[Rule, ...] = RULES) -> str:
    width = max(len(r.name) for r in rules)
    lines = [
        f"{r.code}  {r.name:<{width}}  {r.severity:<7}  {'fix' if r.code in FIXERS else '   '}  "
        f"{r.summary}"
        for r in rules
    ]
    return "\n".join(lines) + "\n"


def run_lint(cfg: LintConfig) -> int:
    """`dpwise lint`: print the report (or the fixes), return 0 when clean, 1 when anything is
    found, 2 when a fixed file could not be written. Usage errors and unreadable paths raise
    DpwiseError, which the main CLI reports on one line with exit code 2."""
    if cfg.explain:
        sys.stdout.write(explain(cfg.explain))
        return 0
    if cfg.list_rules:
        sys.stdout.write(rule_table())
        return 0
    if cfg.fix or cfg.diff:
        return run_fixes(cfg)
    skipped: list[str] = []
    findings = lint_paths(
        cfg.paths, select=cfg.select, ignore=cfg.ignore, skipped=skipped, fixes=True
    )
    _say_skipped(skipped)
    fixing = Fixing(unsafe=cfg.unsafe_fixes)
    _report(cfg, findings, fixing)
    if cfg.show_fixes:
        would = [f for f in findings if fixer.wanted(f, cfg.unsafe_fixes)]
        _aside(cfg, render_fixed(would, done=False))
    return 1 if findings else 0


def _say_skipped(skipped: list[str]) -> None:
    if skipped:
        more = f" and {len(skipped) - 3} more" if len(skipped) > 3 else ""
        shown = ", ".join(skipped[:3]) + more
        print(f"dpwise lint: skipped {shown}: not a regular file", file=sys.stderr)


def _report(cfg: LintConfig, findings: list[Finding], fixing: Fixing) -> None:
    from dpwise import __version__

    rules = selected(cfg.select, cfg.ignore)
    sys.stdout.write(render(findings, cfg.format, rules, __version__, fixing))


def _aside(cfg: LintConfig, text: str) -> None:
    """Text beside the report: after it, or on stderr when stdout is JSON or SARIF."""
    (sys.stderr if cfg.format in ("json", "sarif") else sys.stdout).write(text)


def run_fixes(cfg: LintConfig) -> int:
    """--fix / --diff: fix each file in memory; --diff prints, --fix writes and reports the rest.
    A file that cannot be written is named on stderr (the others are still fixed); exit 2."""
    rules = selected(cfg.select, cfg.ignore)
    skipped: list[str] = []
    paths = files.discover(cfg.paths, skipped)
    _say_skipped(skipped)
    project = Project()
    results = [fixer.fix_file(path, rules, project, cfg.unsafe_fixes) for path in paths]
    for result in results:
        if result is not None and result.broken:
            print(
                f"dpwise lint: a fix made {result.path} unparsable; the file is left as it was "
                "(please report this with the file)",
                file=sys.stderr,
            )
    done = [r for r in results if r is not None]
    fixed = [f for r in done for f in r.fixed]
    if cfg.diff:
        return _show_diff(cfg, done, fixed)
    failed = _write_all([r for r in done if r.changed], fixer.roots(list(cfg.paths)))
    written = {r.path for r in done if r.changed and r.path not in failed}
    fixed = [f for f in fixed if f.path in written]
    remaining = _left(cfg, paths, results, failed)
    _report(cfg, remaining, Fixing(unsafe=cfg.unsafe_fixes, fixed=len(fixed)))
    if cfg.show_fixes:
        _aside(cfg, render_fixed(fixed, done=True))
    if failed:
        return 2
    return 1 if remaining else 0


def _left(
    cfg: LintConfig, paths: list[str], results: list[fixer.Fixed | None], failed: set[str]
) -> list[Finding]:
    """What is left after --fix: each fixed file's findings, as its fix loop last checked its
    text; a file that was not read as Python text, or could not be written, is checked as it is
    on disk."""
    left: list[Finding] = []
    for path, result in zip(paths, results, strict=True):
        if result is None or path in failed:
            left += lint_paths([path], select=cfg.select, ignore=cfg.ignore, fixes=True)
        else:
            left += result.remaining
    return sorted(left)


def _show_diff(cfg: LintConfig, done: list[fixer.Fixed], fixed: list[Finding]) -> int:
    for result in done:
        if result.changed:
            sys.stdout.write(result.diff())
    if cfg.show_fixes:
        sys.stderr.write(render_fixed(fixed, done=False))
    hidden = 0
    if not cfg.unsafe_fixes:
        hidden = sum(1 for r in done for f in r.remaining if f.fix and not fixer.wanted(f, False))
    more = f" ({hidden} more with `--unsafe-fixes`)" if hidden else ""
    print(
        f"Would fix {plural(len(fixed))}{more}." if fixed else f"No fixes available{more}.",
        file=sys.stderr,
    )
    return 1 if fixed else 0


def _write_all(changed: list[fixer.Fixed], allowed: list[Path]) -> set[str]:
    failed: set[str] = set()
    for result in changed:
        try:
            fixer.write(result, allowed)
        except DpwiseError as exc:
            print(f"dpwise lint: {exc}", file=sys.stderr)
            failed.add(result.path)
    return failed
