"""link.png: busbw and algbw of the link probe against message size (log-log), with the fit."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from dpwise.link.fit import bus_factor, model_seconds
from dpwise.report.link_view import caption
from dpwise.report.plotkit import color, num, style_axes


def _measured(probe: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    ops = probe.get("ops") if isinstance(probe, dict) else None
    if not isinstance(ops, dict):
        return []
    return [(op, part) for op, part in ops.items() if isinstance(part, dict) and part.get("points")]


def link_figure(probe: Any) -> Figure | None:
    """One line pair per measured op (busbw solid, algbw dashed) and the fit's busbw (dotted);
    None when the probe measured nothing."""
    measured = _measured(probe)
    if not measured:
        return None
    n = int(probe.get("world_size") or 2)
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    for i, (op, part) in enumerate(measured):
        pts = [p for p in part["points"] if num(p.get("seconds")) and num(p.get("bytes"))]
        xs = [p["bytes"] for p in pts]
        c = color(i)
        ax.plot(xs, [p["busbw_bytes_per_s"] / 1e9 for p in pts], "o-", color=c, label=f"{op} busbw")
        ax.plot(
            xs,
            [p["algbw_bytes_per_s"] / 1e9 for p in pts],
            "s--",
            color=c,
            alpha=0.6,
            label=f"{op} algbw",
        )
        fit = part.get("fit") or {}
        alpha, beta = num(fit.get("alpha_s")), num(fit.get("beta_bytes_per_s"))
        if alpha is not None and beta:
            model = [bus_factor(op, n) * s / model_seconds(op, n, s, alpha, beta) / 1e9 for s in xs]
            ax.plot(
                xs,
                model,
                ":",
                color=c,
                label=f"{op} fit: α {alpha * 1e6:.1f} µs, β {beta / 1e9:.3g} GB/s",
            )
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    style_axes(ax, f"Link probe: {caption(probe)}", "GB/s (10⁹ B/s)", "message size (bytes)")
    return fig
