"""Render findings: concise, full (source line, caret, help), JSON and SARIF 2.1.0.

Pure functions from findings to text; the caller prints. The conventions are Ruff's:
`path:line:col: CODE [name] message`, 1-based columns, a `Found N issues.` footer.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import PurePath, PurePosixPath

from dpwise.lint.model import Finding, Rule

FORMATS = ("full", "concise", "json", "sarif")
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def footer(count: int) -> str:
    if count == 0:
        return "All checks passed!"
    return f"Found {count} issue{'s' if count != 1 else ''}."


def header(f: Finding) -> str:
    return f"{f.path}:{f.line}:{f.col}: {f.code} [{f.name}] {f.message}"


def render_concise(findings: Sequence[Finding]) -> str:
    return "".join(f"{header(f)}\n" for f in findings) + footer(len(findings)) + "\n"


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
    ]


def render_full(findings: Sequence[Finding]) -> str:
    blocks = ["\n".join([header(f), *snippet(f)]) + "\n" for f in findings]
    return "\n".join([*blocks, footer(len(findings))]) + "\n"


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
    return {
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


def render(findings: Sequence[Finding], fmt: str, rules: Iterable[Rule], version: str) -> str:
    if fmt == "concise":
        return render_concise(findings)
    if fmt == "full":
        return render_full(findings)
    if fmt == "json":
        return render_json(findings)
    if fmt == "sarif":
        return json.dumps(sarif_log(findings, rules, version), indent=2) + "\n"
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
