"""report.html: one self-contained page (inline CSS, plots as data: URIs, no external URLs)."""

from __future__ import annotations

import base64
import functools
from pathlib import Path
from typing import Any

import jinja2

from dpwise.report.view import build_view
from dpwise.results.document import Results

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dpwise", "report/templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def png_data_uri(path: Path) -> str | None:
    """The PNG at ``path`` as a data: URI, or None if it is missing or not a PNG."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if not data.startswith(PNG_SIGNATURE):
        return None
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii")


def _embedded_images(view: dict[str, Any], plot_dir: Path) -> dict[str, str]:
    """{plot file: data URI} for every plot the page shows that exists inside ``plot_dir``."""
    names = {c["plot"] for c in view["checks"] if c["plot"]}
    names |= {p["file"] for p in view["extra_plots"]}
    if view["link"] is not None and view["link"]["plot"]:
        names.add(view["link"]["plot"])
    if view["projection"] and view["projection"].get("plot"):
        names.add(view["projection"]["plot"])
    root = plot_dir.resolve()
    images = {}
    for name in sorted(names):
        path = (root / name).resolve()
        if path.is_relative_to(root) and (uri := png_data_uri(path)) is not None:
            images[name] = uri
    return images


def render_html(results: Results, plot_dir: Path) -> str:
    """The whole report as one HTML page; plots are read from ``plot_dir`` and embedded."""
    view = build_view(results)
    images = _embedded_images(view, plot_dir)
    return _environment().get_template("report.html.j2").render(view=view, images=images)
