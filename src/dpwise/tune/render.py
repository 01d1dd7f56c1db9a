"""The search's report: Markdown, HTML and one plot (speed-up against peak memory per
configuration), and the summary the terminal shows, from results.json's document only."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from matplotlib.figure import Figure

from dpwise.infra.atomic import atomic_write_bytes, atomic_write_text
from dpwise.infra.units import mib
from dpwise.report.plotkit import color, png_bytes
from dpwise.tune.space import duration

PLOT = "speedup_memory.png"


@dataclass(frozen=True)
class Written:
    """The report's files."""

    html: Path
    md: Path


def ratio_text(entry: dict[str, Any]) -> str:
    if entry.get("ratio") is None:
        return "—"
    return f"{entry['ratio']:.2f}× ({entry['low']:.2f}–{entry['high']:.2f}×)"


def rows(doc: dict[str, Any]) -> list[list[str]]:
    out = [["default", "1.00× (reference)", mib(doc["default"]["peak_memory"]), "—", "—",
            "reference"]]  # fmt: skip
    for c in doc["candidates"]:
        drift = c["drift"]
        out.append(
            [
                c["name"],
                ratio_text(c),
                mib(c["peak_memory"]),
                "—" if drift is None else f"{drift['max_param_diff']:.2g}",
                "—" if drift is None else f"{drift['loss_distance']:.2g}",
                f"{c['outcome']}: {c['reason']}",
            ]
        )
    return out


COLUMNS = ["configuration", "speed-up vs default (95 % interval)", "peak memory / device",
           "max param diff", "loss distance", "outcome"]  # fmt: skip


def headline(doc: dict[str, Any]) -> str:
    w = doc["winner"]
    if w.get("is_default"):
        return f"Keep the default: {w['reason']}."
    drift = w.get("drift") or {}
    lossy = " It trains the default's model (parameters within the tolerance)."
    if w.get("lossy"):
        lossy = (
            f" It is lossy: its parameters end {drift.get('max_param_diff', 0):.2g} from the "
            f"default's after {drift.get('steps')} steps (loss curves "
            f"{drift.get('loss_distance', 0):.2g} apart)."
        )
    memory = mib(w["peak_memory"])
    return f"Use {w['name']}: {ratio_text(w)} the default's speed, peak memory {memory}.{lossy}"


def markdown(doc: dict[str, Any], plot: str | None) -> str:
    t = doc["timing"]
    lines = [
        f"# dpwise tune: {doc['strategy']}",
        "",
        f"`{doc['command']}`",
        "",
        f"**{headline(doc)}**",
        "",
        "Apply it with:",
        "",
        "```",
        doc["winner"]["train_flags"],
        "```",
        "",
        "```python",
        doc["winner"]["snippet"],
        "```",
        "",
    ]
    if doc.get("runner_up"):
        r = doc["runner_up"]
        lines += [f"Runner-up: {r['name']}, {ratio_text(r)}.", ""]
    lines += [
        f"The search ran {duration(t['elapsed_seconds'])} of a {duration(t['budget_seconds'])} "
        f"budget ({doc['rounds']} rounds; stopped: {doc['stopped']}); the configurations' "
        f"trainings took {duration(t['training_seconds'])}, the search's own work "
        f"{t['overhead_share_of_budget']:.0%} of the budget. Each training: "
        f"{doc['steps']['warm']} warm-up + {doc['steps']['timed']} timed steps.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
    ]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(doc)
    ]
    lines += ["", doc["rule"], ""]
    if plot:
        lines += [f"![speed-up against memory]({plot})", ""]
    for note in doc.get("notes") or []:
        lines += [f"- {note}"]
    return "\n".join(lines) + "\n"


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader("dpwise.tune", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )


def html(doc: dict[str, Any], plot: str | None) -> str:
    return _env().get_template("tune.html.j2").render(
        doc=doc, headline=headline(doc), columns=COLUMNS, rows=rows(doc), plot=plot,
        duration=duration,
    )  # fmt: skip


def figure(doc: dict[str, Any]) -> Figure | None:
    points = [("default", 1.0, None, None, doc["default"]["peak_memory"])]
    for c in doc["candidates"]:
        if c["ratio"] is not None and c["peak_memory"] is not None:
            points.append((c["name"], c["ratio"], c["low"], c["high"], c["peak_memory"]))
    if points[0][4] is None or len(points) < 2:
        return None
    fig = Figure(figsize=(8.0, 5.0), dpi=100)
    ax = fig.add_subplot()
    for i, (name, ratio, low, high, peak) in enumerate(points):
        x = peak / 2**20
        err = None if low is None else [[ratio - low], [high - ratio]]
        ax.errorbar(x, ratio, yerr=err, fmt="o", color=color(i), capsize=3, label=name)
    ax.axhline(1.0, color="#888888", linewidth=0.8)
    ax.axhline(doc["thresholds"]["speed_margin"], color="#888888", linewidth=0.8, linestyle="--")
    ax.set_xlabel("peak memory per device (MiB)")
    ax.set_ylabel("speed-up vs the default (median, 95 % interval)")
    ax.set_title("Each configuration: speed-up against memory")
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def write(doc: dict[str, Any], out: Path) -> Written:
    fig = figure(doc)
    plot = None
    if fig is not None:
        atomic_write_bytes(out / PLOT, png_bytes(fig))
        plot = PLOT
    atomic_write_text(out / "report.md", markdown(doc, plot))
    atomic_write_text(out / "report.html", html(doc, plot))
    return Written(html=out / "report.html", md=out / "report.md")


def summary(doc: dict[str, Any], written: Written) -> str:
    """What the terminal shows after a search: the answer, the runner-up, how to apply it."""
    w = doc["winner"]
    lines = [headline(doc)]
    if doc.get("runner_up"):
        r = doc["runner_up"]
        lines.append(f"runner-up: {r['name']}, {r['ratio']:.2f}× ({r['low']:.2f}–{r['high']:.2f}×)")
    lines.append(f"train with: {w['train_flags']}")
    lines.append(
        f"report: {written.html}  (also {written.md}, {written.html.parent / 'results.json'})"
    )
    return "\n".join(lines)
