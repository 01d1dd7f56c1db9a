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

OPS = ("all_reduce", "reduce_scatter", "all_gather")
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


def fit(op: str, n: int, sizes: Sequence[float], seconds: Sequence[float]) -> dict[str, float]:
    """α (seconds) and β (bytes per second) of the ring model, from measured times.

    The model is linear in α and 1/β: t = a·α + b·S·(1/β). It is fitted by least squares on the
    RELATIVE error, i.e. each equation divided by its measured t, so that a 1 µs miss on a 10 µs
    message weighs as much as a 10 ms miss on a 100 ms one: the small sizes set α, the large
    ones β (busbw of the largest messages), and no size dominates by its magnitude. α is kept
    at or above 0 (a negative latency means the small sizes are noise around a bandwidth line:
    β is then refitted alone). ``worst_error`` is the largest |model − measured| / measured over
    the points.
    """
    if n < 2 or len(sizes) != len(seconds) or len(sizes) < 2:
        raise ValueError("a fit needs n ≥ 2 processes and at least two (size, time) points")
    a = latency_steps(op, n)
    b = bus_factor(op, n)
    rows = [(a / t, b * s / t) for s, t in zip(sizes, seconds, strict=True)]
    alpha, gamma = _least_squares(rows)
    if alpha < 0 or gamma <= 0:
        alpha = 0.0
        gamma = sum(y for _, y in rows) / sum(y * y for _, y in rows)
    beta = 1.0 / gamma if gamma > 0 else math.inf
    worst = max(
        abs(model_seconds(op, n, s, alpha, beta) - t) / t
        for s, t in zip(sizes, seconds, strict=True)
    )
    return {"alpha_s": float(alpha), "beta_bytes_per_s": float(beta), "worst_error": float(worst)}


def _least_squares(rows: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """(x, y) minimising Σ (p·x + q·y − 1)² over the rows (p, q): the 2×2 normal equations."""
    spp = sum(p * p for p, _ in rows)
    sqq = sum(q * q for _, q in rows)
    spq = sum(p * q for p, q in rows)
    sp = sum(p for p, _ in rows)
    sq = sum(q for _, q in rows)
    det = spp * sqq - spq * spq
    if det <= 1e-12 * spp * sqq:  # one kind of point only: no separate α and β
        return -1.0, 0.0
    return (sp * sqq - sq * spq) / det, (sq * spp - sp * spq) / det


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
