"""The projection model: pure functions of measured inputs and a link (no torch here).

ddp at n devices: the buckets DDP launched, at the times the measurement saw them launched
before the end of backward, run one after another on one communication stream, each a ring
all-reduce of 2(n−1)·α + 2(n−1)/n · S/β. What runs past the last launch (the moment backward
reaches the first layers) is exposed; the step is the measured no-sync step plus it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from dpwise.projection.links import Link

DEFAULT_DEVICES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Bucket:
    bytes: int
    ready_ms: float  # launched this long before the step's last bucket


@dataclass(frozen=True, kw_only=True)
class Sharded:
    """What an fsdp run moved per step: unsharded bytes all-gathered / reduce-scattered, ops."""

    run: str
    gathered_bytes: float
    gathers: float
    scattered_bytes: float
    scatters: float


@dataclass(frozen=True, kw_only=True)
class Inputs:
    """What the projection reads from a comparison (see inputs.inputs_from_results)."""

    run: str  # the ddp run the buckets and compute time come from
    measured_world: int
    compute_ms: float  # the step under no_sync, at the per-device batch
    per_device_batch: int
    gradient_bytes: int
    buckets: tuple[Bucket, ...]
    measured_step_ms: float | None = None
    measured_exposed_ms: float | None = None
    device_type: str = "cpu"
    sharded: Sharded | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Point:
    devices: int
    step_ms: float
    compute_ms: float
    exposed_ms: float
    comm_ms: float  # all communication of the step, hidden or not
    samples_per_s: float
    efficiency: float  # compute / step: 1.0 is linear scaling of the measured per-device step
    notes: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "notes": list(self.notes)}


def ring_all_reduce_ms(nbytes: float, n: int, link: Link) -> float:
    """A ring all-reduce of ``nbytes`` over ``n`` devices, in ms (0 on one device)."""
    if n < 2:
        return 0.0
    steps = 2 * (n - 1)
    return (steps * link.alpha_s + steps / n * nbytes / link.beta_bytes_per_s) * 1e3


def ring_gather_ms(nbytes: float, ops: float, n: int, link: Link) -> float:
    """``ops`` all-gathers (or reduce-scatters) moving ``nbytes`` unsharded bytes in all, in ms."""
    if n < 2:
        return 0.0
    return (ops * (n - 1) * link.alpha_s + (n - 1) / n * nbytes / link.beta_bytes_per_s) * 1e3


def exposed_ms(buckets: tuple[Bucket, ...], n: int, link: Link) -> tuple[float, float]:
    """(exposed ms, total all-reduce ms): the buckets simulated on one stream in launch order.

    Times are relative to the last bucket's launch (0): bucket i is launched at −ready_ms, starts
    when it is launched and the stream is free, and takes one ring all-reduce.
    """
    free = float("-inf")
    total = 0.0
    for b in sorted(buckets, key=lambda b: -b.ready_ms):
        took = ring_all_reduce_ms(b.bytes, n, link)
        free = max(-b.ready_ms, free) + took
        total += took
    return (max(0.0, free) if buckets else 0.0), total


def _point(inputs: Inputs, n: int, exposed: float, comm: float, notes=()) -> Point:
    step = inputs.compute_ms + exposed
    return Point(
        devices=n,
        step_ms=step,
        compute_ms=inputs.compute_ms,
        exposed_ms=exposed,
        comm_ms=comm,
        samples_per_s=n * inputs.per_device_batch / step * 1e3 if step > 0 else 0.0,
        efficiency=inputs.compute_ms / step if step > 0 else 0.0,
        notes=tuple(notes),
    )


def project_ddp(inputs: Inputs, link: Link, n: int) -> Point:
    """ddp's step at ``n`` devices over ``link``, the per-device batch kept (weak scaling)."""
    exposed, comm = exposed_ms(inputs.buckets, n, link)
    return _point(inputs, n, exposed, comm)


def project_fsdp(inputs: Inputs, link: Link, n: int) -> Point | None:
    """fsdp's step, assuming NO overlap (an upper bound on its step); None without an fsdp run.

    Per step: the all-gathers of forward and backward and the reduce-scatters the fsdp run made,
    each a ring collective of (n−1)·α + (n−1)/n · S/β, on top of ddp's per-device compute.
    """
    s = inputs.sharded
    if s is None:
        return None
    comm = ring_gather_ms(s.gathered_bytes, s.gathers, n, link)
    comm += ring_gather_ms(s.scattered_bytes, s.scatters, n, link)
    return _point(inputs, n, comm, comm, ("no overlap assumed: an upper bound, not validated",))


def fits(link: Link, n: int) -> bool:
    """Whether ``n`` devices can share ``link``: an intra-node link only within one node."""
    return link.node_devices is None or n <= link.node_devices


class MeasuredCheck(TypedDict):
    """The model against the measured step (the projection section's `check`)."""

    link: str
    devices: int
    projected_step_ms: float
    measured_step_ms: float
    projected_exposed_ms: float
    measured_exposed_ms: float | None
    error: float | None  # (projected - measured) / measured; None for a zero measurement


def check_at_measured(inputs: Inputs, link: Link) -> MeasuredCheck | None:
    """The model at the world size that was measured, over ``link`` (the probed one), against
    the measured step: how far off it is where both exist; None without a measured step."""
    if inputs.measured_step_ms is None:
        return None
    p = project_ddp(inputs, link, inputs.measured_world)
    measured = float(inputs.measured_step_ms)
    return {
        "link": link.name,
        "devices": inputs.measured_world,
        "projected_step_ms": p.step_ms,
        "measured_step_ms": measured,
        "projected_exposed_ms": p.exposed_ms,
        "measured_exposed_ms": inputs.measured_exposed_ms,
        "error": (p.step_ms - measured) / measured if measured > 0 else None,
    }
