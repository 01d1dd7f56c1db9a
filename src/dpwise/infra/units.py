"""Number formatting shared by checks and renderers (GiB = 1024³ bytes)."""

from __future__ import annotations


def mib(n: float | None) -> str:
    """MiB with one decimal; a size that would show as 0.0 MiB in the unit that shows it."""
    if n is None:
        return "–"
    if n and abs(n) < 0.05 * 1024**2:
        return size(n)
    return f"{n / 1024**2:.1f} MiB"


def gib(n: float | None) -> str:
    return "–" if n is None else f"{n / 1024**3:.2f} GiB"


def pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.0f} %"


def rate(x: float | None) -> str:
    return "–" if x is None else f"{x:,.0f}"


def sci(x: float | None) -> str:
    return "–" if x is None else ("0" if x == 0 else f"{x:.1e}")


def size(n: float | None) -> str:
    """Bytes in the largest binary unit that keeps the number at or above 1 (KiB = 1024 B)."""
    if n is None:
        return "–"
    if n == 0:
        return "0"
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(n) >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} B"
