"""Summaries of repeated measurements: median and spread, never a lone sample."""

from __future__ import annotations

import statistics


def summary(values: list[float]) -> dict[str, object]:
    """{median, min, max, values}; the median of an empty list is None."""
    if not values:
        return {"median": None, "min": None, "max": None, "values": []}
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
        "values": list(values),
    }
