"""Terminal lines for `dpwise train`."""

from __future__ import annotations

from typing import Any

from dpwise.engine import EpochReport

GIB = 1024**3


def epoch_line(report: EpochReport) -> str:
    return (
        f"epoch {report.epoch}/{report.epochs}  loss {report.mean_loss:.4f}  "
        f"{report.seconds:.2f} s  {report.samples_per_s:,.0f} samples/s"
    )


def summary_lines(metrics: dict[str, Any]) -> list[str]:
    lines = [
        f"dpwise train: {metrics['strategy']} × {metrics['world_size']} process(es) on "
        f"{metrics['device']} (backend {metrics['backend'] or 'none'}), "
        f"{metrics['global_steps']} steps, final loss {metrics['final_loss']:.6f}"
    ]
    for note in metrics["notes"]:
        lines.append(f"note: {note}")
    peaks = ", ".join(
        f"rank {m['rank']} {m['device']} {m['bytes'] / GIB:.3f} GiB" for m in metrics["peak_memory"]
    )
    lines.append(f"peak memory ({metrics['peak_memory'][0]['kind']}): {peaks}")
    if metrics.get("out"):
        lines.append(f"wrote {metrics['out']}/final.pt and {metrics['out']}/metrics.json")
    return lines
