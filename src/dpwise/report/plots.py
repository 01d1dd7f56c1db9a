"""PNG plots of a `dpwise compare` results document: results in, files out.

Every plot tolerates missing values; a plot with nothing to show is not written and its key
is not returned. Figures are plain `matplotlib.figure.Figure` objects rendered by Agg:
no pyplot, no global backend state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from dpwise.infra.atomic import atomic_write_bytes
from dpwise.report.link_plot import link_figure
from dpwise.report.plotkit import (
    LINESTYLES,
    MARKERS,
    MIB,
    Run,
    annotate_top,
    color,
    new_figure,
    num,
    png_bytes,
    run_label,
    run_ticks,
    style_axes,
)
from dpwise.report.projection_plot import projection_figure
from dpwise.results.document import Results
from dpwise.strategies import reference

MEMORY_TITLES = {
    "cpu_live_tensors": "Peak live tensor memory per process",
    "cuda_max_memory_allocated": "torch.cuda.max_memory_allocated per GPU",
}


def write_plots(results: Results, out_dir: Path) -> dict[str, str]:
    """Write the PNG plots into ``out_dir``; return {plot key: file name relative to out_dir}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    runs = list(results.runs)
    written: dict[str, str] = {}
    figures = {key: draw(runs) for key, draw in PLOTS.items()}
    figures["link"] = link_figure(results.link_probe)
    for key, fig in figures.items():
        if fig is None:
            continue
        name = f"{key}.png"
        atomic_write_bytes(out_dir / name, png_bytes(fig))
        written[key] = name
    fig = projection_figure(results.projection)
    if fig is not None:
        atomic_write_bytes(out_dir / "projection.png", png_bytes(fig))
        written["projection"] = "projection.png"
    return written


# --- throughput -------------------------------------------------------------------------


def _throughput(runs: list[Run]) -> Figure | None:
    points = [
        (run_label(r, i), r, med)
        for i, r in enumerate(runs)
        if (med := num(r.samples_per_s.median)) is not None
    ]
    if not points:
        return None
    scaling = _scaling_series(runs)
    fig, axes = new_figure(len(points), panels=2 if scaling else 1)
    _throughput_bars(axes[0], points)
    if scaling:
        _scaling_lines(axes[1], scaling, _single_baseline(runs))
    return fig


def _throughput_bars(ax: Axes, points: list[tuple[str, Run, float]]) -> None:
    low, high = [], []
    for _, run, med in points:
        lo, hi = num(run.samples_per_s.min), num(run.samples_per_s.max)
        low.append(max(0.0, med - lo) if lo is not None else 0.0)
        high.append(max(0.0, hi - med) if hi is not None else 0.0)
    xs = range(len(points))
    medians = [med for _, _, med in points]
    ax.bar(xs, medians, color=[color(i) for i in xs], width=0.6)
    ax.errorbar(xs, medians, yerr=[low, high], fmt="none", ecolor="#333", capsize=4)
    tops = [med + up for med, up in zip(medians, high, strict=True)]
    for x, (med, top) in enumerate(zip(medians, tops, strict=True)):
        annotate_top(ax, x, top, f"{med:,.0f}")
    ax.set_ylim(0, max(tops) * 1.18 or 1)
    run_ticks(ax, [label for label, _, _ in points])
    style_axes(ax, "Throughput (median; error bars: min–max)", "samples/s", thousands=True)


def _scaling_series(runs: list[Run]) -> dict[str, list[tuple[int, float]]]:
    """{strategy: [(world size, median samples/s)]} for strategies run at ≥ 2 world sizes."""
    series: dict[str, dict[int, float]] = {}
    for run in runs:
        med, size = num(run.samples_per_s.median), run.world_size
        if med is None:
            continue
        series.setdefault(run.strategy, {}).setdefault(size, med)
    return {k: sorted(v.items()) for k, v in series.items() if len(v) >= 2}


def _single_baseline(runs: list[Run]) -> float | None:
    for run in runs:
        if run.strategy == reference() and run.world_size == 1:
            return num(run.samples_per_s.median)
    return None


def _scaling_lines(
    ax: Axes, series: dict[str, list[tuple[int, float]]], single: float | None
) -> None:
    """Measured samples/s per world size, and the ideal line through the world-size-1 point."""
    sizes: set[int] = set()
    for i, (strategy, points) in enumerate(series.items()):
        base = dict(points).get(1, single)
        label = strategy
        if 1 not in dict(points) and single is not None:
            points, label = [(1, single), *points], f"{strategy} (1 = single process)"
        xs, ys = zip(*points, strict=True)
        sizes.update(xs)
        ax.plot(xs, ys, marker=MARKERS[i % len(MARKERS)], color=color(i), label=label)
        if base is not None:
            ideal = [base * x for x in xs]
            ax.plot(xs, ideal, ":", color=color(i), alpha=0.7, label=f"ideal linear ({strategy})")
    ax.set_xticks(sorted(sizes))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, frameon=False)
    style_axes(ax, "Scaling with world size", "samples/s (median)", "world size (processes)", True)


# --- memory -----------------------------------------------------------------------------


def _memory_bars(run: Run) -> list[tuple[int, float]]:
    """[(rank, peak MiB)] of one run's devices that report a peak."""
    bars = []
    for i, dev in enumerate(run.memory.per_device):
        peak = num(dev.peak_bytes)
        if peak is not None:
            bars.append((dev.rank if dev.rank >= 0 else i, peak / MIB))
    return bars


def memory_title(runs: list[Run]) -> str:
    kinds: list[str] = []
    for run in runs:
        kind = run.memory.kind
        if kind and kind not in kinds:
            kinds.append(kind)
    return "; ".join(MEMORY_TITLES.get(k, k.replace("_", " ")) for k in kinds) or "Peak memory"


def _memory(runs: list[Run]) -> Figure | None:
    groups = [(run_label(run, i), _memory_bars(run)) for i, run in enumerate(runs)]
    groups = [(label, bars) for label, bars in groups if bars]
    if not groups:
        return None
    width = 0.8 / max(len(bars) for _, bars in groups)
    annotate = sum(len(bars) for _, bars in groups) <= 12
    fig, (ax,) = new_figure(len(groups))
    seen: set[int] = set()
    for x, (_, bars) in enumerate(groups):
        for j, (rank, mib) in enumerate(bars):
            pos = x + (j - (len(bars) - 1) / 2) * width
            label = None if rank in seen else f"rank {rank}"
            ax.bar(pos, mib, width * 0.92, color=color(rank), label=label)
            seen.add(rank)
            if annotate:
                annotate_top(ax, pos, mib, f"{mib:,.1f}")
    ax.set_ylim(0, max(mib for _, bars in groups for _, mib in bars) * 1.35 or 1)
    run_ticks(ax, [label for label, _ in groups])
    ax.legend(fontsize=8, frameon=False, ncols=min(len(seen), 4), loc="upper right")
    style_axes(ax, f"{memory_title(runs)} (MiB)", "peak memory (MiB)")
    return fig


# --- loss -------------------------------------------------------------------------------


def _loss(runs: list[Run]) -> Figure | None:
    series = []
    for i, run in enumerate(runs):
        values = [num(v) for v in run.losses]
        if any(v is not None for v in values):
            series.append((run_label(run, i), [math.nan if v is None else v for v in values]))
    if not series:
        return None
    fig = Figure(figsize=(7.0, 3.8), layout="constrained")
    ax = fig.subplots()
    for i, (label, ys) in enumerate(series):
        # Thinner lines on top, markers at staggered steps: identical curves stay visible.
        every = max(len(series), len(ys) // 10, 1)
        ax.plot(
            range(1, len(ys) + 1),
            ys,
            label=label,
            color=color(i),
            linestyle=LINESTYLES[i % len(LINESTYLES)],
            linewidth=max(1.0, 3.2 - 0.7 * i),
            marker=MARKERS[i % len(MARKERS)],
            markevery=(i % every, every),
            markersize=6,
        )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=8, frameon=False)
    style_axes(ax, "Training loss per optimizer step", "loss", "optimizer step")
    return fig


# --- communication ----------------------------------------------------------------------


def _comm_bar(run: Run, index: int) -> tuple[str, float, float, float | None] | None:
    """(label, step ms without sync, exposed ms, exposed share) or None without data."""
    comm = run.communication
    if not isinstance(comm, dict):
        return None
    base, exposed = num(comm.get("step_ms_without_sync")), num(comm.get("exposed_ms"))
    if base is None and exposed is None:
        return None
    exposed = max(0.0, exposed or 0.0)
    if base is None:
        step = num(comm.get("step_ms"))
        base = max(0.0, step - exposed) if step is not None else 0.0
    share = num(comm.get("exposed_share"))
    if share is None and base + exposed > 0:
        share = exposed / (base + exposed)
    return run_label(run, index), base, exposed, share


def _communication(runs: list[Run]) -> Figure | None:
    bars = [bar for i, run in enumerate(runs) if (bar := _comm_bar(run, i)) is not None]
    if not bars:
        return None
    fig, (ax,) = new_figure(len(bars))
    xs = range(len(bars))
    base = [b for _, b, _, _ in bars]
    exposed = [e for _, _, e, _ in bars]
    ax.bar(xs, base, width=0.6, color=color(0), label="step without sync")
    ax.bar(
        xs,
        exposed,
        width=0.6,
        bottom=base,
        color=color(1),
        hatch="//",
        edgecolor="white",
        label="exposed communication",
    )
    for x, (_, b, e, share) in enumerate(bars):
        text = f"{share:.0%} exposed" if share is not None else "share n/a"
        annotate_top(ax, x, b + e, f"{b + e:,.3g} ms · {text}")
    ax.set_ylim(0, max(b + e for b, e in zip(base, exposed, strict=True)) * 1.3 or 1)
    run_ticks(ax, [label for label, _, _, _ in bars])
    ax.legend(fontsize=8, frameon=False, loc="upper left")
    style_axes(ax, "Step time: compute and exposed communication", "ms per optimizer step")
    return fig


PLOTS: dict[str, Callable[[list[Run]], Figure | None]] = {
    "throughput": _throughput,
    "memory": _memory,
    "loss": _loss,
    "communication": _communication,
}
