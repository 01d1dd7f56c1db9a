"""The report's projection section as plain strings: a table per link, every assumption, the
links' sources. Computed from results.json's "projection"; nothing is rendered here."""

from __future__ import annotations

from typing import Any

TITLE = "Scaling projection (a projection, not a measurement)"
COLUMNS = ["devices", "step ms", "exposed ms", "samples/s", "efficiency"]
PLOT = "projection.png"


def _rows(points: list[dict[str, Any]]) -> list[list[str]]:
    return [
        [
            f"{p['devices']:,}",
            f"{p['step_ms']:.3g}",
            f"{p['exposed_ms']:.3g}",
            f"{p['samples_per_s']:,.0f}",
            f"{p['efficiency']:.0%}",
        ]
        for p in points
    ]


def _link_text(link: dict[str, Any]) -> str:
    return (
        f"{link['name']}: {link['label']}; β {link['beta_bytes_per_s'] / 1e9:.3g} GB/s, "
        f"α {link['alpha_s'] * 1e6:.3g} µs ({link['basis']}): {link['source']}"
    )


def _tables(section: dict[str, Any], links: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    tables = []
    for series in section.get("series", []):
        label = links.get(series["link"], {}).get("label", series["link"])
        for kind in ("ddp", "fsdp"):
            if series.get(kind):
                tables.append(
                    {
                        "caption": f"{kind} over {label}",
                        "columns": COLUMNS,
                        "rows": _rows(series[kind]),
                        "note": series.get("not_projected", ""),
                    }
                )
    return tables


def projection_view(section: dict[str, Any] | None, plots: dict[str, str] | None) -> dict | None:
    """None when compare made no projection section (an older results.json)."""
    if not section:
        return None
    if section.get("status") != "projected":
        return {"title": TITLE, "absent": f"No projection: {section.get('reason', '')}"}
    links = {link["name"]: link for link in section.get("links", [])}
    inputs = section["inputs"]
    lead = (
        f"From {inputs['run']}: per-device compute {inputs['compute_ms']:.3g} ms per step at "
        f"{inputs['per_device_batch']} samples per device, {len(inputs['buckets'])} gradient "
        f"bucket(s). dp: {section['dp']}. fsdp: {section['fsdp']}."
    )
    check = section.get("check")
    if check and check.get("error") is not None:
        lead += (
            f" Held against the measurement: at {check['devices']} devices over the probed link "
            f"the model gives {check['projected_step_ms']:.3g} ms per step, measured "
            f"{check['measured_step_ms']:.3g} ms ({check['error']:+.0%})."
        )
    plot = PLOT if (plots or {}).get("projection") == PLOT else None
    return {
        "title": TITLE,
        "absent": "",
        "lead": lead,
        "assumptions": list(section.get("assumptions", [])),
        "tables": _tables(section, links),
        "links": [_link_text(link) for link in links.values()],
        "notes": list(section.get("notes", [])),
        "plot": plot,
        "plot_alt": "projected scaling efficiency against the number of devices, per link",
    }
