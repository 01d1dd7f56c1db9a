"""Text of a link probe's result: nccl-tests-like tables and the fitted α, β in human units.

GB/s here is nccl-tests' unit, 10⁹ bytes per second; Gbit/s is 10⁹ bits per second.
"""

from __future__ import annotations

from typing import Any

from dpwise.infra.units import size


def gbps(bytes_per_s: float) -> str:
    """GB/s with four decimals (nccl-tests prints two): a 200 Mbit/s link reads 0.0239."""
    return f"{bytes_per_s / 1e9:.4f}"


def fit_line(fit: dict[str, Any]) -> str:
    """α in µs, β in GB/s and Gbit/s, and the fit's worst relative error over the points."""
    beta = fit["beta_bytes_per_s"]
    return (
        f"fit (ring model): α = {fit['alpha_s'] * 1e6:.1f} µs, β = {beta / 1e9:#.4g} GB/s "
        f"({beta * 8 / 1e9:#.3g} Gbit/s); worst error {100 * fit['worst_error']:.0f} % over the "
        "points"
    )


def headline(result: dict[str, Any]) -> str:
    hosts = sorted(set(result.get("hosts") or []))
    where = f" on {', '.join(hosts)}" if hosts else ""
    return (
        f"link probe: {result['backend']} between {result['world_size']} processes "
        f"({result['device_type']}){where}"
    )


def op_lines(op: str, part: dict[str, Any]) -> list[str]:
    """One op's block: a header, a row per size, the fit (or why the op was not measured)."""
    if "unsupported" in part:
        return [f"{op}: not measured ({part['unsupported']})"]
    lines = [
        op,
        f"{'size':>12} {'bytes':>12} {'time (µs)':>12} {'algbw (GB/s)':>13} {'busbw (GB/s)':>13}",
    ]
    for p in part["points"]:
        lines.append(
            f"{size(p['bytes']):>12} {p['bytes']:>12} {p['seconds'] * 1e6:>12.1f} "
            f"{gbps(p['algbw_bytes_per_s']):>13} {gbps(p['busbw_bytes_per_s']):>13}"
        )
    lines.append(fit_line(part["fit"]))
    return lines


def link_lines(result: dict[str, Any]) -> list[str]:
    lines = [headline(result)]
    for op, part in result["ops"].items():
        lines.append("")
        lines.extend(op_lines(op, part))
    lines.append("")
    lines.append(
        "busbw = algbw × 2(n−1)/n for all_reduce, × (n−1)/n for all_gather and reduce_scatter "
        "(nccl-tests' definitions); bytes: the whole tensor"
    )
    return lines
