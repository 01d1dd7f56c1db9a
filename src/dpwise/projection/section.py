"""results.json's "projection": the inputs read, the links used (with their sources), every
assumption, and the projected points per link."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpwise.infra.units import size
from dpwise.projection.inputs import NoInputs, inputs_from_results
from dpwise.projection.links import Link, link_from_probe, resolve
from dpwise.projection.model import (
    DEFAULT_DEVICES,
    Inputs,
    check_at_measured,
    fits,
    project_ddp,
    project_fsdp,
)
from dpwise.results.document import Results

TREES = "https://developer.nvidia.com/blog/massively-scale-deep-learning-training-nccl-2-4/"
DP_ON_CPU = (
    "not projected: DataParallel's copies were not measured here (on the CPU DataParallel runs "
    "the model in one process, a pass-through)"
)
DP_ON_GPU = (
    "not projected: DataParallel's scatter / replicate / gather were measured (see the runs), "
    "but dpwise has no model that carries them to other devices yet"
)


HOST_CLOCK = (
    "on CUDA the bucket launch times are the host's: where the host runs ahead of the GPU they "
    "come early, and the overlap with backward is overstated"
)


def assumptions(inputs: Inputs) -> list[str]:
    kinds = len(inputs.buckets)
    device = [HOST_CLOCK] if inputs.device_type == "cuda" else []
    return [
        *device,
        "a projection, not a measurement: the model below applied to what this comparison measured",
        f"per-device batch kept at {inputs.per_device_batch} (the global batch grows with the "
        "device count)",
        f"per-device compute = the measured step of {inputs.run} under no_sync "
        f"({inputs.compute_ms:.3g} ms): the devices projected compute as fast as the ones "
        f"measured here ({inputs.device_type}), and communication does not slow them",
        f"DDP's gradient buckets as measured: {kinds} bucket(s), "
        f"{size(sum(b.bytes for b in inputs.buckets))} in all, each launched at its measured "
        "time before the end of backward; they all-reduce one after another on one stream",
        "each all-reduce is a flat ring over the link, 2(n−1)·α + 2(n−1)/n·S/β; across nodes "
        "the ring runs at the slowest link: conservative, NCCL's tree and hierarchical "
        f"algorithms do better at scale ({TREES}); the latency term 2(n−1)·α grows with n and "
        "dominates small buckets at large n, where NCCL's trees pay about log2(n) steps",
        "β is the bus bandwidth (nccl-tests' busbw) each device gets at every device count: no "
        "congestion, one NIC per device on inter-node links",
        "intra-node links (NVLink, PCIe) are projected only up to one node's devices",
        "efficiency = compute / projected step: 1.0 is throughput growing linearly from the "
        "measured per-device step",
        "no stragglers: every device ends backward at the same moment (a measured all-reduce "
        "also waits for the slowest process; the model has no term for it)",
    ]


def _series(inputs: Inputs, link: Link, devices: tuple[int, ...], fsdp: bool) -> dict[str, Any]:
    ns = [n for n in devices if fits(link, n)]
    ddp = [project_ddp(inputs, link, n).to_json() for n in ns]
    out: dict[str, Any] = {"link": link.name, "ddp": ddp}
    if fsdp:
        out["fsdp"] = [p.to_json() for n in ns if (p := project_fsdp(inputs, link, n))]
    skipped = [n for n in devices if n not in ns]
    if skipped:
        out["not_projected"] = (
            f"{', '.join(map(str, skipped))} devices: beyond one node ({link.node_devices} "
            f"devices) for an intra-node link"
        )
    return out


def _probed(probe: Mapping[str, Any] | None) -> Link | None:
    return link_from_probe(probe) if isinstance(probe, Mapping) and probe.get("ops") else None


def build(
    results: Results | Mapping[str, Any],
    link_names: tuple[str, ...],
    devices: tuple[int, ...] = DEFAULT_DEVICES,
    probe: Mapping[str, Any] | None = None,
    flag: str = "--project-links",
) -> dict[str, Any]:
    """The projection section; {"status": "absent", "reason": ...} when there is no ddp run
    at two or more processes to read buckets from."""
    try:
        inputs = inputs_from_results(results)
    except NoInputs as exc:
        return {"status": "absent", "reason": str(exc)}
    probed = _probed(probe)
    links, notes = resolve(link_names, probed, flag)
    fsdp = inputs.sharded is not None
    return {
        "status": "projected",
        "inputs": inputs.to_json(),
        "devices": list(devices),
        "links": [link.to_json() for link in links],
        "assumptions": assumptions(inputs),
        "series": [_series(inputs, link, devices, fsdp) for link in links],
        "fsdp": "projected with no overlap (upper bound), not validated"
        if fsdp
        else "not projected: the comparison ran no fsdp",
        "dp": DP_ON_CPU if inputs.device_type == "cpu" else DP_ON_GPU,
        "notes": notes,
        # the model where it can be held against the measurement: the measured world size over
        # the probed link (None without a probe)
        "check": None if probed is None else check_at_measured(inputs, probed),
    }
