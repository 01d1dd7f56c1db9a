"""Links a projection runs over: named presets with their published source, a probed link, a
link written on the command line.

A link is the ring model's two numbers: α, the latency of one ring step, and β, the per-device
"bus" bandwidth that nccl-tests reports as busbw (an all-reduce of S bytes over n devices takes
2(n−1)·α + 2(n−1)/n · S/β). Each preset says where its β comes from: a published nccl-tests style
measurement (``basis="measured"``), or a datasheet line rate times an efficiency the preset states
(``basis="datasheet × efficiency"``). The α of most presets is an order-of-magnitude assumption
and says so: it matters only for small buckets at large device counts.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from dpwise.errors import DpwiseError

GB = 1e9
US = 1e-6
INTRA, INTER = "intra-node", "inter-node"


@dataclass(frozen=True, kw_only=True)
class Link:
    name: str
    label: str
    alpha_s: float
    beta_bytes_per_s: float
    basis: str  # measured | datasheet × efficiency | probe | custom
    source: str
    scope: str = INTER  # intra-node links exist only within one node
    node_devices: int | None = None  # intra-node: the most devices one node holds

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> Link:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})


_ALPHA_ASSUMED = "α assumed (order of magnitude, not a measurement)"
_PCIE_EFF = (
    "efficiency 0.5, taken from the PCIe 5.0 measurement (28-35 GB/s busbw of 63 GB/s per "
    "direction, https://github.com/NVIDIA/nccl/issues/1639)"
)
_ETH_EFF = (
    "efficiency 0.8 assumed: TCP payload is at most ~94 % of the line rate at MTU 1500, and NCCL's "
    "socket transport reached at most 60 % of wire speed at 32 Gb/s "
    "(https://github.com/NVIDIA/nccl/issues/209)"
)
_ETH_ALPHA = (
    "α 45 µs: an 8-byte NCCL broadcast between two nodes over TCP took 45.8 µs "
    "(https://github.com/NVIDIA/nccl-tests/issues/82)"
)


def _preset(name, label, alpha_us, beta_gb, basis, source, scope=INTER, node=None) -> Link:
    return Link(
        name=name,
        label=label,
        alpha_s=alpha_us * US,
        beta_bytes_per_s=beta_gb * GB,
        basis=basis,
        source=source,
        scope=scope,
        node_devices=node,
    )


def _eth(gbit: int) -> Link:
    return _preset(
        f"eth-{gbit}g",
        f"{gbit} Gb/s Ethernet (TCP)",
        45,
        gbit / 8 * 0.8,
        "datasheet × efficiency",
        f"line rate {gbit} Gb/s = {gbit / 8:g} GB/s × 0.8; {_ETH_EFF}; {_ETH_ALPHA}",
    )


PRESETS: dict[str, Link] = {
    link.name: link
    for link in (
        _preset(
            "nvlink3",
            "A100 SXM4 NVLink3 / NVSwitch (8 GPUs)",
            5,
            230,
            "measured",
            "8×A100 SXM4 all_reduce_perf busbw 230-250 GB/s at large sizes "
            "(https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests); a user's "
            "8×A100 80GB measured ~200 GB/s (https://github.com/NVIDIA/nccl-tests/issues/149); "
            + _ALPHA_ASSUMED,
            INTRA,
            8,
        ),
        _preset(
            "nvlink4",
            "H100 SXM5 NVLink4 / NVSwitch (8 GPUs)",
            5,
            460,
            "measured",
            "8×H100 SXM5 all_reduce_perf busbw 460-480 GB/s at large sizes "
            "(https://docs.alayanew.com/en/docs/tech-blog/2026-05-06-nccl-tests); "
            + _ALPHA_ASSUMED,
            INTRA,
            8,
        ),
        _preset(
            "pcie3",
            "PCIe 3.0 x16 (within one node)",
            13,
            15.75 * 0.5,
            "datasheet × efficiency",
            f"line rate 15.75 GB/s per direction × 0.5; {_PCIE_EFF}; α 13 µs: a 16-byte "
            "all-reduce of two GPUs behind one PCIe switch took 25.8 µs = 2α "
            "(https://github.com/ROCm/rccl/issues/362)",
            INTRA,
            8,
        ),
        _preset(
            "pcie4",
            "PCIe 4.0 x16 (within one node)",
            13,
            31.5 * 0.5,
            "datasheet × efficiency",
            f"line rate 31.5 GB/s per direction × 0.5; {_PCIE_EFF}; α as pcie3 "
            "(https://github.com/ROCm/rccl/issues/362)",
            INTRA,
            8,
        ),
        _preset(
            "pcie5",
            "PCIe 5.0 x16 (8 GPUs, within one node)",
            13,
            28,
            "measured",
            "8×RTX 5090 on PCIe 5.0: all_reduce_perf busbw 28 GB/s at 8 GPUs, 35 GB/s at 4 "
            "(https://github.com/NVIDIA/nccl/issues/1639); α as pcie3 "
            "(https://github.com/ROCm/rccl/issues/362)",
            INTRA,
            8,
        ),
        _preset(
            "ib-hdr",
            "InfiniBand HDR 200 Gb/s, one NIC per GPU",
            5,
            24,
            "measured",
            "DGX-A100 with 8×200 Gb/s IB NICs measures 192 GB/s all-reduce busbw, i.e. 24 GB/s "
            "per NIC (NCCL maintainer, https://github.com/NVIDIA/nccl/issues/1576); "
            "'~24GB/s per NIC' (https://github.com/NVIDIA/nccl-tests/issues/252); "
            + _ALPHA_ASSUMED,
        ),
        _preset(
            "ib-ndr",
            "InfiniBand NDR 400 Gb/s, one NIC per GPU",
            5,
            48,
            "measured",
            "'CX-7 NICs at NDR rate (400Gbps) should achieve up to 48-49GB/s per NIC' (NCCL "
            "maintainer, https://github.com/NVIDIA/nccl-tests/issues/267); " + _ALPHA_ASSUMED,
        ),
        _preset(
            "eth-100g",
            "100 Gb/s Ethernet (RoCE), one NIC per GPU",
            45,
            9.4,
            "measured",
            "two A100 nodes with 8×100 Gb/s RoCE NICs reached ~600 Gb/s all-reduce busbw, "
            "9.4 GB/s per NIC, called 'a bit low' by the maintainers "
            "(https://github.com/NVIDIA/nccl/issues/495); 12.2 GB/s is the best a 100 Gb/s "
            "InfiniBand card gives (https://github.com/NVIDIA/nccl-tests/issues/29); " + _ETH_ALPHA,
        ),
        _eth(25),
        _eth(10),
        _eth(1),
    )
}
PROBED = "probe"
DEFAULT_LINKS = (PROBED, "nvlink4", "ib-ndr", "eth-100g", "eth-10g")
EXAMPLE = "a preset (" + ", ".join(PRESETS) + "), 'probe', or BANDWIDTH@LATENCY like 12.5GB/s@5us"

_BW = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([kmgt]?)(i?)(bit|b)/s", re.IGNORECASE)
_LAT = re.compile(r"([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*(ns|us|µs|ms|s)")
_PREFIX = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
_BINARY = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0}


def bandwidth(text: str) -> float | None:
    """Bytes per second of '12.5GB/s', '100Gb/s', '1Gbit/s', '10GiB/s' (b: bits, B: bytes)."""
    m = _BW.fullmatch(text.strip())
    if not m:
        return None
    scale = (_BINARY if m[3] else _PREFIX)[m[2].lower()]
    bits = m[4] == "bit" or m[4] == "b"
    return float(m[1]) * scale / (8 if bits else 1)


def latency(text: str) -> float | None:
    m = _LAT.fullmatch(text.strip())
    return float(m[1]) * _SECONDS[m[2]] if m else None


def custom(text: str, flag: str) -> Link:
    """A link written as [NAME=]BANDWIDTH@LATENCY: the bus bandwidth and one ring step's latency."""
    name, _, spec = text.rpartition("=")
    bw_text, at, lat_text = spec.partition("@")
    beta, alpha = bandwidth(bw_text), latency(lat_text) if at else None
    if beta is None or alpha is None or beta <= 0:
        raise DpwiseError(f"{flag} {text!r} is not a link; give {EXAMPLE}")
    name = name.strip() or spec.strip()
    return Link(
        name=name,
        label=f"custom {bw_text.strip()} at {lat_text.strip()}",
        alpha_s=alpha,
        beta_bytes_per_s=beta,
        basis="custom",
        source=f"given on the command line ({flag} {text})",
    )


def check_names(flag: str, names: tuple[str, ...] | None) -> None:
    """Each name is a preset, 'probe' or a well-formed custom link (raises the one-line error)."""
    for name in names or ():
        if name not in PRESETS and name != PROBED:
            custom(name, flag)


def resolve(names: tuple[str, ...], probed: Link | None, flag: str) -> tuple[list[Link], list[str]]:
    """The links named, and a note for each that could not be used ('probe' without a probe)."""
    links, notes = [], []
    for name in names:
        if name == PROBED:
            if probed is None:
                notes.append("no link probe in these results: the probed link is not projected")
            else:
                links.append(probed)
        elif name in PRESETS:
            links.append(PRESETS[name])
        else:
            links.append(custom(name, flag))
    return links, notes


def link_from_probe(probe: Mapping[str, Any]) -> Link:
    """The all-reduce fit of a link probe (results.json's "link_probe", or probe-link's JSON)."""
    ops = probe.get("ops") if isinstance(probe, Mapping) else None
    fit = (ops or {}).get("all_reduce", {}).get("fit") if isinstance(ops, Mapping) else None
    if not isinstance(fit, Mapping) or not fit.get("beta_bytes_per_s"):
        raise DpwiseError("the link probe has no all-reduce fit (ops.all_reduce.fit); probe again")
    world, backend = probe.get("world_size"), probe.get("backend")
    return Link(
        name=PROBED,
        label=f"probed: {backend} on {probe.get('device_type')}, {world} processes",
        alpha_s=max(0.0, float(fit.get("alpha_s") or 0.0)),
        beta_bytes_per_s=float(fit["beta_bytes_per_s"]),
        basis="probe",
        source=f"measured by dpwise's link probe (run {probe.get('run')}, all-reduce fit, "
        f"worst error {fit.get('worst_error')})",
    )
