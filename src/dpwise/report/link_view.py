"""The report's "Link probe" section as plain strings: results.json's link_probe in, text out."""

from __future__ import annotations

from typing import Any

from dpwise.infra.units import size
from dpwise.link.text import fit_line, gbps

TITLE = "Link probe"
COLUMNS = ["op", "size", "bytes", "time (µs)", "algbw (GB/s)", "busbw (GB/s)"]
DEFINITIONS = (
    "Timed the way nccl-tests does (doc/PERFORMANCE.md): bytes is the whole tensor, algbw = "
    "bytes / time, busbw = algbw × 2(n−1)/n for all_reduce and × (n−1)/n for all_gather and "
    "reduce_scatter; a size's time is the largest, over the processes, of each one's median "
    "(nccl-tests: the mean). "
    "GB/s = 10⁹ bytes per second. The fit is the ring model: all_reduce t = 2(n−1)·α + "
    "2(n−1)/n · S/β."
)


def caption(probe: dict[str, Any]) -> str:
    return (
        f"measured on this machine's {probe.get('backend', '?')} link between "
        f"{probe.get('world_size', '?')} processes"
    )


def _rows(op: str, part: dict[str, Any]) -> list[list[str]]:
    return [
        [
            op,
            size(p["bytes"]),
            f"{p['bytes']:,}",
            f"{p['seconds'] * 1e6:,.1f}",
            gbps(p["algbw_bytes_per_s"]),
            gbps(p["busbw_bytes_per_s"]),
        ]
        for p in part.get("points", [])
    ]


def link_view(probe: Any, plot: str | None) -> dict[str, Any] | None:
    """The section's text (None without a probe); ``plot``: link.png's file name if written."""
    if not isinstance(probe, dict) or not isinstance(probe.get("ops"), dict):
        return None
    rows, fits = [], []
    for op, part in probe["ops"].items():
        if "unsupported" in part:
            fits.append(f"{op}: not measured ({part['unsupported']})")
            continue
        rows += _rows(op, part)
        fits.append(f"{op}: {fit_line(part['fit'])}")
    run = probe.get("run")
    where = caption(probe) + (f" (run {run}, as its last work)" if run else "")
    return {
        "title": TITLE,
        "caption": where[0].upper() + where[1:] + ".",
        "definitions": DEFINITIONS,
        "fits": fits,
        "columns": COLUMNS,
        "rows": rows,
        "plot": plot,
        "plot_alt": f"busbw and algbw by message size, {caption(probe)}",
    }
