"""Shared pieces of the report plots: palette, tolerant value access, axes styling."""

from __future__ import annotations

import io
import math
import textwrap
from typing import Any

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import StrMethodFormatter

from dpwise.results.records import Run

DPI = 100
MIB = 1024**2
# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")
LINESTYLES = ("-", "--", "-.", ":")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")


def num(value: Any) -> float | None:
    """``value`` as a finite float, or None (absent, None, NaN, bool, text)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def run_label(run: Run, index: int) -> str:
    return str(run.label or run.id or f"run {index + 1}")


def color(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def new_figure(n_bars: int, panels: int = 1) -> tuple[Figure, list[Axes]]:
    width = min(11.0, max(5.5, 1.4 * n_bars + 2.5)) + 4.5 * (panels - 1)
    fig = Figure(figsize=(width, 3.8), layout="constrained")
    return fig, list(fig.subplots(1, panels, squeeze=False)[0])


def style_axes(
    ax: Axes, title: str, ylabel: str, xlabel: str = "", thousands: bool = False
) -> None:
    ax.set_title(title, fontsize=11, loc="left")
    ax.set_ylabel(ylabel)
    ax.set_xlabel(xlabel)
    ax.spines[["top", "right"]].set_visible(False)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if thousands:
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))


def run_ticks(ax: Axes, labels: list[str]) -> None:
    """One wrapped label per bar group; at least three slots wide so one bar stays slim."""
    ax.set_xticks(range(len(labels)), [textwrap.fill(label, 16) for label in labels])
    pad = max(0, 3 - len(labels)) / 2
    ax.set_xlim(-0.6 - pad, len(labels) - 0.4 + pad)


def annotate_top(ax: Axes, x: float, y: float, text: str) -> None:
    ax.annotate(
        text,
        (x, y),
        xytext=(0, 3),
        textcoords="offset points",
        ha="center",
        va="bottom",
        fontsize=8,
    )


def png_bytes(fig: Figure) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, facecolor="white")
    return buf.getvalue()
