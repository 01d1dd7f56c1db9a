"""Render findings: concise, full (source line, caret, help, fix), JSON and SARIF 2.1.0.

Pure functions from findings to text; the caller prints. The conventions are Ruff's:
`path:line:col: CODE [name] message`, 1-based columns, a `Found N issues.` footer, a
`[*] N fixable with the --fix option` line, fixes with their applicability and edits.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import PurePath, PurePosixPath

from dpwise.lint.model import SAFE, Finding, Rule

FORMATS = ("full", "concise", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


@dataclass(frozen=True)
class Fixing:
    """How fixes were asked for: `unsafe` (--unsafe-fixes), and after --fix how many were."""

    unsafe: bool = False
    fixed: int | None = None  # None: --fix was not given


def plural(count: int, noun: str = "issue") -> str:
    return f"{count} {noun}{'s' if count != 1 else ''}"


def footer(findings: Sequence[Finding], fixing: Fixing = Fixing()) -> str:
    count = len(findings)
    if fixing.fixed:
        total = f"Found {plural(count + fixing.fixed)} ({fixing.fixed} fixed, {count} remaining)."
    elif count == 0:
        return "All checks passed!"
    else:
        total = f"Found {plural(count)}."
    return total + fixable_line(findings, fixing)


def fixable_line(findings: Sequence[Finding], fixing: Fixing) -> str:
    """Ruff's `[*] 2 fixable with the --fix option (1 hidden fix can be enabled with the
    --unsafe-fixes option).`"""
    safe = sum(1 for f in findings if f.fix and f.fix.applicability == SAFE)
    unsafe = sum(1 for f in findings if f.fix and f.fix.applicability != SAFE)
    usable, hidden = (safe + unsafe, 0) if fixing.unsafe else (safe, unsafe)
    option = "`--fix --unsafe-fixes`" if fixing.unsafe and unsafe else "`--fix`"
    more = ""
    if hidden:
        fix = "fix" if hidden == 1 else "fixes"
        more = f" ({hidden} hidden {fix} can be enabled with the `--unsafe-fixes` option)"
    if usable:
        return f"\n[*] {usable} fixable with the {option} option{more}."
    return f"\nNo fixes available{more}." if more else ""


def header(f: Finding) -> str:
    return f"{f.path}:{f.line}:{f.col}: {f.code} [{f.name}] {f.message}"


def render_concise(findings: Sequence[Finding], fixing: Fixing = Fixing()) -> str:
    return "".join(f"{header(f)}\n" for f in findings) + footer(findings, fixing) + "\n"


def snippet(f: Finding) -> list[str]:
    """The source line with a caret under the reported range, Ruff style."""
    gutter = " " * len(str(f.line))
    text = f.source_line.replace("\t", " ")
    start = max(f.col - 1, 0)
    end = f.end_col - 1 if f.end_line == f.line and f.end_col > f.col else len(text.rstrip())
    carets = "^" * max(end - start, 1)
    return [
        f"{gutter} |",
        f"{f.line} | {text}".rstrip(),
        f"{gutter} | {' ' * start}{carets} {f.code}",
        f"{gutter} |",
        f"{gutter} = help: {f.help}",
        *([f"{gutter} = fix ({f.fix.applicability}): {f.fix.message}"] if f.fix else []),
    ]


def render_full(findings: Sequence[Finding], fixing: Fixing = Fixing()) -> str:
    blocks = ["\n".join([header(f), *snippet(f)]) + "\n" for f in findings]
    return "\n".join([*blocks, footer(findings, fixing)]) + "\n"


def render_fixed(fixed: Sequence[Finding], done: bool) -> str:
    """Ruff's `--show-fixes` list: per file, how many of each rule were fixed."""
    if not fixed:
        return "No fixes applied.\n" if done else "No fixes available.\n"
    lines = [f"{'Fixed' if done else 'Would fix'} {plural(len(fixed))}:"]
    for path in dict.fromkeys(f.path for f in fixed):
        lines.append(f"- {path}:")
        counts: dict[tuple[str, str], int] = {}
        for f in fixed:
            if f.path == path:
                counts[(f.code, f.name)] = counts.get((f.code, f.name), 0) + 1
        lines += [f"    {n} × {code} ({name})" for (code, name), n in sorted(counts.items())]
    return "\n".join(lines) + "\n"


def render_json(findings: Sequence[Finding]) -> str:
    return json.dumps([f.to_dict() for f in findings], indent=2) + "\n"


def _uri(path: str) -> str:
    pure = PurePath(path)
    return pure.as_uri() if pure.is_absolute() else str(PurePosixPath(*pure.parts))


def sarif_rule(rule: Rule) -> dict[str, object]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.docs},
        "help": {"text": rule.help, "markdown": rule.docs},
        "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        "properties": {"severity": rule.severity},
    }


def sarif_result(f: Finding, index: dict[str, int]) -> dict[str, object]:
    region = {"startLine": f.line, "startColumn": f.col}
    if f.end_line and f.end_col:
        region |= {"endLine": f.end_line, "endColumn": f.end_col}
    result: dict[str, object] = {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": SARIF_LEVEL[f.severity],
        "message": {"text": f"{f.message} (help: {f.help})"},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": _uri(f.path)},
                    "region": region,
                }
            }
        ],
    }
    if f.fix is not None:
        result["fixes"] = [sarif_fix(f)]
        result["properties"] = {"fixApplicability": f.fix.applicability}
    return result


def sarif_fix(f: Finding) -> dict[str, object]:
    """SARIF 2.1.0 §3.55: a fix is artifact changes, each a list of replacements (a deleted
    region, 1-based with an exclusive end column, and the text inserted there)."""
    assert f.fix is not None
    replacements = [
        {
            "deletedRegion": {
                "startLine": e.line,
                "startColumn": e.col,
                "endLine": e.end_line,
                "endColumn": e.end_col,
            },
            "insertedContent": {"text": e.content},
        }
        for e in sorted(f.fix.edits)
    ]
    return {
        "description": {"text": f"{f.fix.message} ({f.fix.applicability} fix)"},
        "artifactChanges": [
            {"artifactLocation": {"uri": _uri(f.path)}, "replacements": replacements}
        ],
    }


def sarif_log(findings: Sequence[Finding], rules: Iterable[Rule], version: str) -> dict:
    rules = list(rules)
    index = {r.code: i for i, r in enumerate(rules)}
    driver = {
        "name": "dpwise",
        "version": version,
        "rules": [sarif_rule(r) for r in rules],
    }
    results = [sarif_result(f, index) for f in findings]
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [{"tool": {"driver": driver}, "results": results}],
    }


def render(
    findings: Sequence[Finding],
    fmt: str,
    rules: Iterable[Rule],
    version: str,
    fixing: Fixing = Fixing(),
) -> str:
    if fmt == "concise":
        return render_concise(findings, fixing)
    if fmt == "full":
        return render_full(findings, fixing)
    if fmt == "json":
        return render_json(findings)
    if fmt == "sarif":
        return json.dumps(sarif_log(findings, rules, version), indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
