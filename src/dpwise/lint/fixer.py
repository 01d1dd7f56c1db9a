"""`dpwise lint --fix` / `--diff`: apply the fixes of a file's findings until none is left,
check that the result parses, and write it back (or show the diff). Never prints.

As in Ruff, fixing is a loop: apply every fix whose edits do not touch another's, check the file
again, repeat (a fix can settle or reveal other findings), at most MAX_ROUNDS times.
"""

from __future__ import annotations

import ast
import difflib
import os
from dataclasses import dataclass, field
from pathlib import Path

from dpwise.errors import DpwiseError
from dpwise.infra import userfile
from dpwise.lint import files
from dpwise.lint.analysis.project import Project
from dpwise.lint.checker import lint_source
from dpwise.lint.fix import edits
from dpwise.lint.model import SAFE, Finding, Rule

MAX_ROUNDS = 10


@dataclass
class Fixed:
    """One file's outcome: its text before and after, the findings fixed and those left."""

    path: str
    before: str
    after: str
    encoding: str = "utf-8"
    stamp: userfile.Stamp | None = None  # the file as read: written back only if still so
    fixed: list[Finding] = field(default_factory=list)
    remaining: list[Finding] = field(default_factory=list)
    broken: bool = False  # a fix made code that does not parse: nothing is kept

    @property
    def changed(self) -> bool:
        return self.after != self.before

    def diff(self) -> str:
        """A unified diff, as `diff -u` / git write it (a last line without a line ending is
        marked)."""
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=self.path,
            tofile=self.path,
        )
        return "".join(
            line if line.endswith(("\n", "\r")) else f"{line}\n\\ No newline at end of file\n"
            for line in lines
        )


def wanted(finding: Finding, unsafe: bool) -> bool:
    return finding.fix is not None and (unsafe or finding.fix.applicability == SAFE)


def fix_source(
    source: str,
    path: str,
    rules: list[Rule],
    project: Project | None = None,
    unsafe: bool = False,
) -> Fixed:
    """Apply fixes to one file's text until none applies; findings are left as they are if a
    fix would make the file unparsable (a bug in a fixer: reported, never written)."""
    result = Fixed(path, source, source)
    current = source
    findings = lint_source(current, path, rules, project, fixes=True)
    for _ in range(MAX_ROUNDS):
        todo = [f for f in findings if wanted(f, unsafe)]
        if not todo:
            break
        new, applied = edits.apply(current, [f.fix for f in todo if f.fix is not None])
        if not applied or new == current:
            break
        try:
            ast.parse(new)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return Fixed(path, source, source, remaining=findings, broken=True)
        done = set(applied)
        result.fixed += [f for f in todo if f.fix in done]
        current = new
        findings = lint_source(current, path, rules, project, fixes=True)
    result.after = current
    result.remaining = findings
    return result


def fix_file(path: str, rules: list[Rule], project: Project, unsafe: bool) -> Fixed | None:
    """Fix one file's text (nothing is written); None for a file that cannot be read as
    Python text or is too large (the plain check reports it)."""
    try:
        source, encoding, stamp = files.read_for_fix(path)
    except (UnicodeDecodeError, SyntaxError, files.TooLarge):
        return None
    result = fix_source(source, path, rules, project, unsafe)
    result.encoding, result.stamp = encoding, stamp
    return result


def roots(paths: list[str]) -> list[Path]:
    """What --fix may write: the folders and files given, as the file system resolves them."""
    return [Path(os.path.realpath(p)) for p in paths]


def write(result: Fixed, allowed: list[Path]) -> None:
    """Replace the file with its fixed text, atomically, keeping its encoding (a BOM included),
    line endings, owner and mode, and only if it is still the text that was fixed (an edit
    made meanwhile is kept: userfile.Changed). Through a symbolic link the file it points to is
    replaced, if that lies inside ``allowed`` (roots()); else nothing is written."""
    real = Path(os.path.realpath(result.path))
    if not any(real == root or root in real.parents for root in allowed):
        raise DpwiseError(
            f"{result.path}: a link to {real}, outside the paths given; not written (give "
            f"{real} itself to fix it)"
        )
    try:
        data = result.after.encode(result.encoding)
        if not os.access(real, os.W_OK):
            raise PermissionError(13, "permission denied: the file is read-only")
    except (UnicodeEncodeError, OSError) as exc:
        raise DpwiseError(f"{result.path}: cannot write the fixes ({_why(exc)})") from exc
    if result.stamp is None:
        raise DpwiseError(f"{result.path}: not read by fix_file; nothing written")
    try:
        userfile.replace(result.path, data, result.stamp)
    except OSError as exc:
        raise DpwiseError(f"{result.path}: cannot write the fixes ({_why(exc)})") from exc


def _why(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)
