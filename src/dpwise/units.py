"""Number formatting shared by checks and renderers (GiB = 1024³ bytes)."""

from __future__ import annotations


def mib(n: float | None) -> str:
    return "–" if n is None else f"{n / 1024**2:.1f} MiB"


def gib(n: float | None) -> str:
    return "–" if n is None else f"{n / 1024**3:.2f} GiB"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def rate(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def sci(x: float | None) -> str:
    return "–" if x is None else ("0" if x == 0 else f"{x:.1e}")
