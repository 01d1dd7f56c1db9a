"""The report's content as plain strings, shared by the Markdown and HTML renderers.

Everything here is computed from the results document; nothing is rendered. Missing or None
values become "—" so that both renderers can stay free of special cases.
"""

from __future__ import annotations

import re
from typing import Any

from dpwise.report.link_view import link_view
from dpwise.report.projection_view import projection_view
from dpwise.results.document import Results
from dpwise.results.records import CheckResult, Run

TITLE = "dpwise compare report"
DASH = "—"
MIB = 1024**2
# status: (emoji for Markdown, text glyph for HTML: takes the badge colour, needs no emoji font)
STATUSES = {
    "pass": ("✅", "✓"),
    "fail": ("❌", "✗"),
    "warn": ("⚠️", "⚠"),
    "skip": ("⏭️", "↷"),
}
PLOT_DESCRIPTIONS = {
    "throughput": "training throughput in samples per second for each run",
    "memory": "peak memory per device for each run, in MiB",
    "loss": "training loss per optimizer step for every run",
    "communication": "step time split into compute and exposed communication, in ms",
    "link": "busbw and algbw of the link probe by message size",
}
PROJECTION = "projection.png"  # shown in the projection section, not among "more plots"
RUN_COLUMNS = ["run", "world size", "backend", "devices", "threads per process", "notes"]
CLAIM_COLUMNS = ["claim", "source", "measured", "verdict", "why"]
CLAIM_TONES = (  # (word in the verdict, tone), first match wins
    ("did not hold", "fail"),
    ("not hold", "fail"),
    ("cannot", "skip"),
    ("not tested", "skip"),
    ("not measurable", "warn"),
    ("partly", "warn"),
    ("partially", "warn"),
    ("hold", "pass"),
    ("held", "pass"),
)


def fmt_value(value: Any, key: str = "") -> str:
    """One cell's text: thousands separators, bytes also in MiB, lists joined, None as —."""
    if value is None or value == "" or value == [] or value == {}:
        return DASH
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,} ({value / MIB:,.1f} MiB)" if key.endswith("_bytes") else f"{value:,}"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        return ", ".join(fmt_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={fmt_value(v)}" for k, v in value.items())
    return str(value)


def status_view(status: Any) -> dict[str, str]:
    word = str(status or "unknown").lower()
    emoji, glyph = STATUSES.get(word, ("•", "•"))
    key = word if word in STATUSES else "other"
    return {"key": key, "word": word, "glyph": glyph, "text": f"{emoji} {word}"}


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "check"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def table_view(table: Any) -> dict[str, list[Any]]:
    """{"columns": [...], "rows": [[...]]} with every row as wide as the header, cells as text."""
    table = _dict(table)
    rows = [
        [fmt_value(c) for c in row] for row in _list(table.get("rows")) if isinstance(row, list)
    ]
    columns = [fmt_value(c) for c in _list(table.get("columns"))]
    width = max([len(columns), *(len(row) for row in rows)])
    columns += [""] * (width - len(columns))
    return {"columns": columns, "rows": [row + [""] * (width - len(row)) for row in rows]}


def plot_files(results: Results) -> dict[str, str] | None:
    """{file name: plot key} of the plots written, or None when results says nothing."""
    if results.plots is None:
        return None
    return {name: key for key, name in results.plots.items() if name}


def plot_alt(name: str, files: dict[str, str] | None, subject: str) -> str:
    key = (files or {}).get(name, name.rsplit(".", 1)[0])
    return f"{subject}: {PLOT_DESCRIPTIONS.get(key, key.replace('_', ' '))}"


def _check_view(check: CheckResult, files: dict[str, str] | None) -> dict[str, Any]:
    name = str(check.name or "check")
    plot = check.plot
    plot = str(plot) if plot and (files is None or str(plot) in files) else None
    return {
        "name": name,
        "anchor": f"check-{slug(name)}",
        "status": status_view(check.status),
        "summary": str(check.summary or ""),
        "explanation": str(check.explanation or ""),
        "table": table_view(check.table),
        "plot": plot,
        "plot_alt": plot_alt(plot, files, f"Plot for the {name} check") if plot else "",
    }


def _claim_view(claim: dict[str, Any]) -> dict[str, Any]:
    cells = {col: fmt_value(claim.get(col)) for col in CLAIM_COLUMNS}
    verdict = cells["verdict"].lower()
    tone = next((tone for word, tone in CLAIM_TONES if word in verdict), "other")
    return {"cells": [cells[col] for col in CLAIM_COLUMNS], "tone": tone}


def _devices(devices: Any) -> str:
    devices = [str(d) for d in _list(devices)]
    if len(devices) > 1 and len(set(devices)) == 1:
        return f"{len(devices)} × {devices[0]}"
    return fmt_value(devices)


def _run_row(run: Run) -> list[str]:
    notes = "; ".join(str(n) for n in run.notes)
    return [
        fmt_value(run.label or run.id),
        fmt_value(run.world_size),
        fmt_value(run.backend),
        _devices(list(run.devices)),
        fmt_value(run.threads_per_process),
        notes or DASH,
    ]


def key_values(block: Any) -> list[list[str]]:
    return [[str(k).replace("_", " "), fmt_value(v, str(k))] for k, v in _dict(block).items()]


def _verdict_view(rec: dict[str, Any]) -> dict[str, Any]:
    strategy, size = rec.get("strategy"), rec.get("world_size")
    recommended = ""
    if strategy:
        recommended = f"{strategy}" + (f" × {size}" if isinstance(size, int) else "")
    inconclusive = rec.get("status") == "inconclusive"
    return {
        "headline": str(rec.get("headline") or "No recommendation was made."),
        "recommended": recommended,
        "recommended_label": "Safe default until a run decides" if inconclusive else "Recommended",
        "reasons": [str(r) for r in _list(rec.get("reasons"))],
    }


def _extra_plots(files: dict[str, str] | None, used: set[str | None]) -> list[dict[str, str]]:
    extra = [name for name in (files or {}) if name not in used]
    return [{"file": name, "alt": plot_alt(name, files, "Plot")} for name in extra]


def build_view(results: Results) -> dict[str, Any]:
    """All the report's text, in reading order, as strings and lists of strings."""
    files = plot_files(results)
    checks = [_check_view(c, files) for c in results.checks]
    link_plot = "link.png" if files is not None and "link.png" in files else None
    used = {c["plot"] for c in checks if c["plot"]} | {link_plot}
    return {
        "title": TITLE,
        "verdict": _verdict_view(results.recommendation),
        "claim_columns": CLAIM_COLUMNS,
        "claims": [_claim_view(c) for c in results.claims],
        "checks": checks,
        "link": link_view(results.link_probe, link_plot),
        "extra_plots": _extra_plots(files, used | {PROJECTION}),
        "projection": projection_view(results.projection, results.plots),
        "run_columns": RUN_COLUMNS,
        "runs": [_run_row(run) for run in results.runs],
        "environment": key_values(results.environment),
        "workload": key_values(results.workload),
        "command": fmt_value(results.command),
        "version": fmt_value(results.dpwise_version),
        "created": fmt_value(results.created),
    }
