"""Write the report files of a `dpwise compare` results document: plots, report.md, report.html."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from dpwise.infra.atomic import atomic_write_text
from dpwise.report.html import render_html
from dpwise.report.markdown import render_markdown
from dpwise.report.plots import write_plots
from dpwise.results.document import Results


def write_reports(results: Results, out_dir: Path) -> tuple[Results, dict[str, Path]]:
    """Write the plots, report.md and report.html into ``out_dir``.

    Returns the results with ``plots`` set to the plots actually written (so that results.json,
    written afterwards by the caller, names only files that exist) and
    {"markdown": path, "html": path, plot key: path, ...}.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = write_plots(results, out_dir)
    results = replace(results, plots=plots)
    paths = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    atomic_write_text(paths["markdown"], render_markdown(results))
    atomic_write_text(paths["html"], render_html(results, out_dir))
    return results, {**paths, **{key: out_dir / name for key, name in plots.items()}}
