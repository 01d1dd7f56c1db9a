"""Run the selected rules over files; return findings (never prints)."""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterable

from dpwise.lint import files
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.project import Project
from dpwise.lint.fix.edits import column as _column
from dpwise.lint.model import Finding, Fix, Hit, Rule
from dpwise.lint.rules import CHECKS, FIXERS, INCOMPLETE, NOT_CHECKED, SYNTAX_ERROR, selected
from dpwise.lint.rules.analysis_incomplete import FILE_BUDGET_S

# A file that mentions none of these cannot trigger any rule (names resolve through imports of
# torch or the conventional aliases, or through a set-up helper such as `dist_util.setup_dist()`
# or `init_distributed_mode(args)`); it is parsed for syntax errors only.
_TRIGGERS = ("torch", "DDP", "DataParallel", "dist", "mp.", "nn.", "MASTER_PORT")


def _fix(rule: Rule, ctx: FileContext, hit: Hit) -> Fix | None:
    """The hit's fix, if its rule has a fixer and the fixer can write one here. A fixer that
    fails (a bug, code LibCST cannot read, an expression too deep for it) offers no fix: a
    finding is never lost to it."""
    fixer = FIXERS.get(rule.code)
    if fixer is None:
        return None
    try:
        return fixer(ctx, hit)
    except (Exception, RecursionError, MemoryError):
        return None


def _finding(rule: Rule, path: str, ctx: FileContext, hit: Hit, fixes: bool) -> Finding:
    node = hit.node
    line = node.lineno  # type: ignore[attr-defined]  # a reported node is an expression or a statement: it has a position (ast.AST's stub declares none)
    text = ctx.line_text(line)
    end_line = getattr(node, "end_lineno", None) or line
    end_offset = getattr(node, "end_col_offset", None)
    end_col = _column(ctx.line_text(end_line), end_offset) if end_offset is not None else 0
    return Finding(
        path=path,
        line=line,
        col=_column(text, node.col_offset),  # type: ignore[attr-defined]  # as above
        code=rule.code,
        name=rule.name,
        severity=rule.severity,
        message=hit.message or rule.message,
        help=hit.help or rule.help,
        end_line=end_line,
        end_col=end_col,
        source_line=text,
        fix=_fix(rule, ctx, hit) if fixes else None,
    )


_OLD_KEYWORD = re.compile(r"(?:\.\s*|\bdef\s+)(async|await)\b|\b(async|await)\s*=(?!=)")


def _why(text: str) -> str:
    """A reason for errors that old code hits: `async` / `await` used as names.

    Sources: bpo-30406 made both proper keywords in Python 3.7; pytorch/pytorch#3431 and #4999
    renamed `.cuda(async=...)` to `non_blocking=...` for that reason."""
    match = _OLD_KEYWORD.search(text)
    if match is None:
        return ""
    word = match.group(1) or match.group(2)
    renamed = "; PyTorch's `async=True` argument is `non_blocking=True` today" * (word == "async")
    why = f"`{word}` is a reserved keyword since Python 3.7: code written for an older Python"
    return f" ({why}{renamed})"


def _syntax_error(path: str, source: str, exc: Exception) -> Finding:
    line = getattr(exc, "lineno", None) or 1
    col = getattr(exc, "offset", None) or 1
    lines = source.splitlines()
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    detail = getattr(exc, "msg", None) or str(exc)
    detail += _why(text)
    return Finding(
        path=path,
        line=line,
        col=max(col, 1),
        code=SYNTAX_ERROR.code,
        name=SYNTAX_ERROR.name,
        severity=SYNTAX_ERROR.severity,
        message=f"{SYNTAX_ERROR.message}: {detail}",
        help=SYNTAX_ERROR.help,
        end_line=line,
        end_col=0,
        source_line=text,
    )


def _not_checked(path: str, source: str, why: str) -> Finding:
    return _about_file(NOT_CHECKED, path, source, why)


def _stopped(path: str, source: str, done: int, total: int) -> Finding:
    """The file's rules took their time budget: the ones after `done` did not run."""
    why = f"{done} of {total} rules ran within the {FILE_BUDGET_S:g} s a file may take"
    return _about_file(INCOMPLETE, path, source, why)


def _about_file(rule: Rule, path: str, source: str, why: str) -> Finding:
    """A finding about the whole file (its first line), that the checker reports itself."""
    return Finding(
        path=path,
        line=1,
        col=1,
        code=rule.code,
        name=rule.name,
        severity=rule.severity,
        message=f"{rule.message}: {why}",
        help=rule.help,
        end_line=1,
        end_col=0,
        source_line=source.split("\n", 1)[0][:200],
    )


def lint_source(
    source: str,
    path: str = "<string>",
    rules: list[Rule] | None = None,
    project: Project | None = None,
    fixes: bool = False,
) -> list[Finding]:
    """Findings for one file's text, noqa applied, sorted; with `fixes`, each carries its fix
    where its rule has one. A file nested too deeply to parse or analyse (RecursionError,
    MemoryError) is one `file-not-checked` finding."""
    rules = selected(None, None) if rules is None else rules
    try:
        return _lint_source(source, path, rules, project, fixes)
    except (RecursionError, MemoryError) as exc:
        if not any(r.code == NOT_CHECKED.code for r in rules):
            return []
        why = f"nested too deeply to analyse ({type(exc).__name__})"
        return [_not_checked(path, source, why)]


def _lint_source(
    source: str, path: str, rules: list[Rule], project: Project | None, fixes: bool
) -> list[Finding]:
    codes = {r.code for r in rules}
    deadline = time.monotonic() + FILE_BUDGET_S  # parsing counts too
    try:
        tree = ast.parse(source, filename=path)
    except (SyntaxError, ValueError) as exc:
        return [_syntax_error(path, source, exc)] if SYNTAX_ERROR.code in codes else []
    if not any(word in source for word in _TRIGGERS):
        return []
    ctx = FileContext(path, source, tree, project)
    found: list[Finding] = []
    run = [r for r in rules if r.code in CHECKS]
    for done, rule in enumerate(run):
        check = CHECKS[rule.code]
        if time.monotonic() > deadline and rule.code != INCOMPLETE.code:
            if INCOMPLETE.code in codes:
                found.append(_stopped(path, source, done, len(run)))
            break
        try:
            found += [_finding(rule, path, ctx, hit, fixes) for hit in check(ctx)]
        except (RecursionError, MemoryError):
            raise  # the file's depth, not a bug in the rule: lint_source reports it
        except Exception as exc:  # a bug in a rule: say where, keep the traceback
            raise RuntimeError(f"dpwise lint: {rule.code} failed on {path}: {exc!r}") from exc
    noqa = files.noqa_lines(source)
    return sorted(f for f in set(found) if not files.suppressed(noqa, f.line, f.code, f.name))


def lint_paths(
    paths: Iterable[str] | str,
    select: Iterable[str] | str | None = None,
    ignore: Iterable[str] | str | None = None,
    skipped: list[str] | None = None,
    fixes: bool = False,
) -> list[Finding]:
    """Check files and folders (recursing into `*.py`); findings sorted by path, line, column.
    Unknown rule codes or names, and missing or unreadable paths, raise DpwiseError. Files in
    folders that are not regular files (FIFOs, sockets, devices) are skipped, listed in
    ``skipped`` when given."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    rules = selected(select, ignore)
    codes = {r.code for r in rules}
    project = Project()
    found: list[Finding] = []
    for path in files.discover(paths, skipped):
        try:
            source = files.read_source(path)
        except (UnicodeDecodeError, SyntaxError) as exc:
            if SYNTAX_ERROR.code in codes:
                found.append(_syntax_error(path, "", exc))
            continue
        except files.TooLarge as exc:
            if NOT_CHECKED.code in codes:
                limit = files.MAX_FILE_BYTES // 2**20
                why = f"{exc.args[0]:,} bytes is over the {limit} MiB limit for one file"
                found.append(_not_checked(path, "", why))
            continue
        found += lint_source(source, path, rules, project, fixes)
    return sorted(found)
