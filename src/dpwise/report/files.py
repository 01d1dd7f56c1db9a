"""Write the report files of a `dpwise compare` results dict: plots, report.md, report.html."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dpwise.atomic import atomic_write_text
from dpwise.report.html import render_html
from dpwise.report.markdown import render_markdown
from dpwise.report.plots import write_plots


def write_reports(results: dict[str, Any], out_dir: Path) -> dict[str, Path]:
    """Write the plots, report.md and report.html into ``out_dir``.

    Sets ``results["plots"]`` to the plots actually written (so that results.json, written
    afterwards by the caller, names only files that exist) and returns
    {"markdown": path, "html": path, plot key: path, ...}.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(results, out_dir)
    results["plots"] = plots
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    atomic_write_text(paths["markdown"], render_markdown(results))
    atomic_write_text(paths["html"], render_html(results, out_dir))
    return {**paths, **{key: out_dir / name for key, name in plots.items()}}
