"""Bandwidth arithmetic and the latency/bandwidth fit of a link probe: pure functions, no torch.

The definitions are nccl-tests' (doc/PERFORMANCE.md in NVIDIA/nccl-tests): ``bytes`` is the
size of the whole, unsharded tensor; algorithm bandwidth ``algbw = bytes / seconds``; bus
bandwidth ``busbw = algbw × factor``, where the factor makes the figure comparable with the
link's peak whatever the number of processes n: ``2(n−1)/n`` for all-reduce, ``(n−1)/n`` for
all-gather and reduce-scatter.

The cost model is the ring's, with per-message latency α and link bandwidth β:

    all-reduce                     t = 2(n−1)·α + 2(n−1)/n · S/β
    all-gather, reduce-scatter     t =  (n−1)·α +  (n−1)/n · S/β

so that for large messages busbw → β, and for small ones t → steps·α.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import median

OPS = ("all_reduce", "reduce_scatter", "all_gather")
EDGE_POINTS = 3  # the smallest sizes set α, the largest set β
REFINE = 5  # alternations of the two estimates (each corrects the other's small share)
MIN_SECONDS_PER_BYTE = 1e-15  # β at most 10¹⁵ B/s: large messages no slower than small ones
# (latency steps per process count, bandwidth factor) of each op, as functions of n
_STEPS = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}


def bus_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on ``n`` processes: 2(n−1)/n or (n−1)/n."""
    return _STEPS[op] * (n - 1) / n


def latency_steps(op: str, n: int) -> int:
    """How many α a ring ``op`` on ``n`` processes pays: 2(n−1) or (n−1)."""
    return _STEPS[op] * (n - 1)


def point(op: str, n: int, nbytes: int, seconds: float) -> dict[str, float | int]:
    """One measured size: bytes, seconds, algbw and busbw (bytes per second)."""
    algbw = nbytes / seconds if seconds > 0 else math.inf
    return {
        "bytes": int(nbytes),
        "seconds": float(seconds),
        "algbw_bytes_per_s": float(algbw),
        "busbw_bytes_per_s": float(algbw * bus_factor(op, n)),
    }


def model_seconds(op: str, n: int, nbytes: float, alpha_s: float, beta: float) -> float:
    """The ring model's time for one ``op`` of ``nbytes`` (the whole tensor) on ``n`` processes."""
    return latency_steps(op, n) * alpha_s + bus_factor(op, n) * nbytes / beta


def fit(
    op: str, n: int, sizes: Sequence[float], seconds: Sequence[float], edge: int = EDGE_POINTS
) -> dict[str, float]:
    """α (seconds) and β (bytes per second) of the ring model, from measured times.

    α comes from the ``edge`` smallest messages, where the time is almost all latency; β from
    the ``edge`` largest, where it is almost all bandwidth, so that β is the large messages'
    busbw (for all-reduce: t ≈ 2(n−1)/n · S/β, i.e. β ≈ busbw). Each is the median over its
    points (one noisy point moves neither), with the other term's small share subtracted;
    the two are refined in turn a few times (each step moves them by the other's small
    share, so it converges in two or three). α is kept at or above 0. ``worst_error`` is the
    largest |model − measured| / measured over ALL the points: how far the two-parameter
    model is from the sizes in between (a protocol switch, a burst allowance, noise).
    """
    if n < 2 or len(sizes) != len(seconds) or len(sizes) < 2:
        raise ValueError("a fit needs n ≥ 2 processes and at least two (size, time) points")
    a, b = latency_steps(op, n), bus_factor(op, n)
    pts = sorted(zip(sizes, seconds, strict=True))
    small, large = pts[:edge], pts[-edge:]
    alpha, per_byte = 0.0, 0.0
    for _ in range(REFINE):
        per_byte = max(MIN_SECONDS_PER_BYTE, median((t - a * alpha) / (b * s) for s, t in large))
        alpha = max(0.0, median((t - b * s * per_byte) / a for s, t in small))
    beta = 1.0 / per_byte
    worst = max(abs(model_seconds(op, n, s, alpha, beta) - t) / t for s, t in pts)
    return {"alpha_s": float(alpha), "beta_bytes_per_s": float(beta), "worst_error": float(worst)}


def sizes(min_bytes: int, max_bytes: int, n: int, factor: int = 4) -> list[int]:
    """Message sizes from ``min_bytes`` growing ×``factor`` up to ``max_bytes`` (included).

    Each size is rounded up to a whole number of float32 elements per process (4·n bytes), so
    that reduce-scatter and all-gather split the tensor evenly; duplicates are dropped.
    """
    unit = 4 * n
    out: list[int] = []
    s = min_bytes
    while s < max_bytes:
        out.append(s)
        s *= factor
    out.append(max_bytes)
    rounded = [unit * max(1, math.ceil(x / unit)) for x in out]
    return sorted(set(rounded))
