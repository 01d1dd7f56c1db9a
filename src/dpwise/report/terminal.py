"""Terminal rendering for `dpwise compare`: a progress display and the closing summary."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from dpwise.infra.units import mib, rate, sci
from dpwise.results.document import Results
from dpwise.results.records import Recommendation

STATUS_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "skip": "dim"}


class CompareProgress:
    """One bar over every unit of work (each repeat and each profiled probe of each run)."""

    def __init__(self, total_units: int, console: Console, enabled: bool) -> None:
        self.progress = Progress(
            TextColumn("[bold]{task.description:<28}"),
            BarColumn(),
            TextColumn("{task.completed}/{task.total}"),
            TimeElapsedColumn(),
            console=console,
            disable=not enabled,
            transient=False,
        )
        self.task = self.progress.add_task("starting", total=total_units)

    def __enter__(self) -> CompareProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()

    def on_event(self, event: dict[str, Any]) -> None:
        what = event["what"]
        if what == "start":
            self.progress.update(self.task, description=event["label"])
        elif what in ("repeat", "probe"):
            self.progress.advance(self.task)


def summary_table(results: Results) -> Table:
    table = Table(title="dpwise compare", show_lines=False)
    for col in ("run", "samples/s", "speed-up", "peak/device", "max |Δparam|"):
        table.add_column(col, justify="left" if col == "run" else "right")
    for r in results.runs:
        table.add_row(
            r.label,
            rate(r.median_rate),
            f"{r.speedup_vs_single:.2f}×",
            mib(r.memory.busiest),
            sci(r.max_param_diff_vs_single),
        )
    return table


def checks_table(results: Results) -> Table:
    table = Table(show_header=True)
    table.add_column("check")
    table.add_column("status")
    table.add_column("summary")
    for c in results.checks:
        style = STATUS_STYLE.get(c.status, "")
        table.add_row(c.name, f"[{style}]{c.status}[/]", c.summary)
    return table


def verdict_lines(results: Results) -> list[str]:
    rec = Recommendation.from_json(results.recommendation)
    return [f"[bold]{rec.headline}[/]", *(f"  • {reason}" for reason in rec.reasons)]


def projection_line(results: Results, at: int = 64) -> str | None:
    """One line: the projected ddp efficiency at ``at`` devices per link (the last device count
    an intra-node link reaches)."""
    section = results.projection
    if not section:
        return None
    if section.get("status") != "projected":
        return f"projection: none ({section.get('reason', '')})"
    parts = []
    for series in section.get("series", []):
        points = [p for p in series.get("ddp", []) if p["devices"] <= at]
        if points:
            p = points[-1]
            parts.append(f"{series['link']} {p['efficiency']:.0%} at {p['devices']}")
    return (
        "projection (a model, not a measurement; assumptions in the report): ddp efficiency "
        + ", ".join(parts)
    )
