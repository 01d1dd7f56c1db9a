"""projection.png: projected ddp scaling efficiency against the device count, one line a link."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import PercentFormatter

from dpwise.report.plotkit import LINESTYLES, MARKERS, color, style_axes


def projection_figure(section: dict[str, Any] | None) -> Figure | None:
    """None when there is nothing projected."""
    if not section or section.get("status") != "projected":
        return None
    labels = {link["name"]: link["label"] for link in section.get("links", [])}
    series = [s for s in section.get("series", []) if s.get("ddp")]
    if not series:
        return None
    fig = Figure(figsize=(8.5, 4.2), layout="constrained")
    ax = fig.subplots()
    for i, s in enumerate(series):
        xs = [p["devices"] for p in s["ddp"]]
        ys = [p["efficiency"] for p in s["ddp"]]
        ax.plot(
            xs,
            ys,
            color=color(i),
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            marker=MARKERS[i % len(MARKERS)],
            label=labels.get(s["link"], s["link"]),
        )
    ax.set_xscale("log", base=2)
    ticks = sorted({p["devices"] for s in series for p in s["ddp"]})
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    style_axes(ax, "ddp scaling efficiency, projected (not measured)", "efficiency", "devices")
    ax.legend(fontsize=8, loc="lower left")
    return fig
