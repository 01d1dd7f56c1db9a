"""torch.profiler probes: collectives, device sync points and live tensor memory."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from dpwise.errors import DpwiseError
from dpwise.infra.atomic import no_room

STEP_MARK = "dpwise.step"
# Backend-level events torch.distributed records for each collective (gloo:/nccl: prefixes).
_COLLECTIVES = {
    "all_reduce": ("all_reduce", "allreduce"),
    "broadcast": ("broadcast",),
    "all_gather": ("all_gather", "allgather"),
    "reduce_scatter": ("reduce_scatter", "reducescatter"),
}
_BACKEND_PREFIXES = ("gloo:", "nccl:", "mpi:", "ucc:")
# The dispatcher's c10d ops name the collective that was asked for whatever the backend runs:
# gloo carries out FSDP's reduce-scatter (c10d::_reduce_scatter_base_) as "gloo:all_reduce".
_REQUESTED = "c10d::"
# Bytes moved, by kind (Collectives' bytes_*_per_step): all-reduce counts its tensors;
# all-gather and reduce-scatter the unsharded (largest) tensor of the op.
_MOVING = ("all_reduce", "all_gather", "reduce_scatter")
_SYNC_NAMES = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")
# DataParallel's own communication (autograd functions in torch.nn.parallel._functions).
_DP_OPS = {
    "broadcast": ("Broadcast",),
    "reduce_add": ("ReduceAddCoalesced",),
    "scatter": ("Scatter",),
    "gather": ("Gather",),
}


@contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """Kineto prints a line to fd 2 at every profiler start and stop; keep the terminal clean."""
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


@contextmanager
def session(device_type: str, with_memory: bool, with_shapes: bool = True) -> Iterator[Any]:
    """torch.profiler around a block. Input shapes (needed to count the bytes collectives move)
    cost memory while recording: a ViT-sized step under shapes and memory recording peaked about
    1.65× its plain peak, under memory recording alone about 1.2×; ask only for what is read."""
    activities = [ProfilerActivity.CPU]
    if device_type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    prof = profile(activities=activities, record_shapes=with_shapes, profile_memory=with_memory)
    with _native_stderr_silenced():
        prof.start()
    try:
        yield prof
    finally:
        with _native_stderr_silenced():
            prof.stop()


def mark_step() -> AbstractContextManager[Any]:
    return record_function(STEP_MARK)


@dataclass(frozen=True)
class Window:
    start: float
    end: float

    def holds(self, t: float) -> bool:
        return self.start <= t <= self.end


def on_cpu(events: Iterable[Any]) -> list[Any]:
    """Host-side events only: with CUDA activity, annotations also appear on the GPU timeline."""
    return [e for e in events if e.device_type == DeviceType.CPU]


def step_windows(events: Iterable[Any], skip: int) -> list[Window]:
    marks = sorted(
        (e.time_range.start, e.time_range.end) for e in on_cpu(events) if e.name == STEP_MARK
    )
    return [Window(s, e) for s, e in marks[skip:]]


def _kind(name: str) -> str | None:
    lowered = name.lower()
    if not lowered.startswith(_BACKEND_PREFIXES):
        return None
    return _named_kind(lowered)


def _named_kind(lowered: str) -> str | None:
    for kind, needles in _COLLECTIVES.items():
        if any(n in lowered for n in needles):
            return kind
    return None


def _requested_kind(name: str) -> str | None:
    """The collective a c10d dispatcher op asked for (c10d::_allgather_base_ → all_gather)."""
    if not name.startswith(_REQUESTED):
        return None
    return _named_kind(name[len(_REQUESTED) :].replace("_base", "").strip("_").lower())


def _elements(shapes: Any) -> int:
    total = 0
    for shape in shapes or []:
        if isinstance(shape, (list, tuple)) and shape and all(isinstance(d, int) for d in shape):
            count = 1
            for dim in shape:
                count *= dim
            total += count
    return total


def _largest(shapes: Any) -> int:
    """Elements of the largest tensor among (possibly nested) input shapes."""
    if isinstance(shapes, (list, tuple)) and shapes and all(isinstance(d, int) for d in shapes):
        return _elements([shapes])
    if isinstance(shapes, (list, tuple)):
        return max((_largest(s) for s in shapes), default=0)
    return 0


def backend_kinds(events: list[Any]) -> list[tuple[Any, str, Any]]:
    """Each backend collective event with the collective it carries out and its request.

    Backend events follow their c10d requests in issue order (gloo's workers take them from one
    queue): paired in order, each event takes its request's kind; where the two lists do not
    line up, the backend's own name decides (and the request is None).
    """
    ran = _started([(e, k) for e in on_cpu(events) if (k := _kind(e.name))])
    asked = _started([(e, k) for e in on_cpu(events) if (k := _requested_kind(e.name))])
    if len(asked) != len(ran):
        return [(e, kind, None) for e, kind in ran]
    return [(e, kind, a) for (e, _), (a, kind) in zip(ran, asked, strict=True)]


def _started(kinds: list[tuple[Any, str]]) -> list[tuple[Any, str]]:
    """(event, kind) pairs in the order their events started."""
    return sorted(kinds, key=lambda pair: pair[0].time_range.start)


def _moved(kind: str, event: Any, request: Any) -> int:
    """Elements one collective moved: all-reduce's tensors; the unsharded tensor otherwise."""
    if kind == "all_reduce" or request is None:
        return _elements(event.input_shapes)
    return _largest(request.input_shapes)


class OpRate(TypedDict):
    """One kind of communication per measured step (results.json's `communication`)."""

    op: str
    count_per_step: float
    ms_per_step: float


class Collectives(TypedDict):
    """What the collectives of the measured steps did, per step."""

    collectives: list[OpRate]
    bytes_all_reduced_per_step: float
    bytes_all_gathered_per_step: float
    bytes_reduce_scattered_per_step: float
    time_source: Literal["nccl kernels", "host events"]


def collectives(events: list[Any], windows: list[Window], element_size: int) -> Collectives:
    """Per measured step: count and milliseconds of each collective, bytes each kind moved.

    Counts and sizes come from the host-side c10d events, kinds from the op that was requested;
    on CUDA the time comes from the NCCL kernels (the host event only covers enqueueing it).
    """
    steps = max(1, len(windows))
    stats = {kind: {"count": 0, "us": 0.0} for kind in _COLLECTIVES}
    moved = dict.fromkeys(_MOVING, 0)
    for e, kind, request in backend_kinds(events):
        if not any(w.holds(e.time_range.start) for w in windows):
            continue
        stats[kind]["count"] += 1
        stats[kind]["us"] += e.time_range.elapsed_us()
        if kind in moved:
            moved[kind] += _moved(kind, e, request) * element_size
    kernels = _nccl_kernel_us(events, windows[0].start if windows else 0.0)
    for kind, us in kernels.items():
        stats[kind]["us"] = us
    return {
        "collectives": [
            {"op": k, "count_per_step": v["count"] / steps, "ms_per_step": v["us"] / 1e3 / steps}
            for k, v in stats.items()
        ],
        "bytes_all_reduced_per_step": moved["all_reduce"] / steps,
        "bytes_all_gathered_per_step": moved["all_gather"] / steps,
        "bytes_reduce_scattered_per_step": moved["reduce_scatter"] / steps,
        "time_source": "nccl kernels" if kernels else "host events",
    }


_NCCL_KERNELS = {
    "allreduce": "all_reduce",
    "broadcast": "broadcast",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
}


def _nccl_kernel_us(events: list[Any], since: float) -> dict[str, float]:
    """Device time of NCCL kernels that started after the first measured step began."""
    totals: dict[str, float] = {}
    for e in events:
        name = e.name.lower()
        if e.device_type != DeviceType.CUDA or "nccl" not in name or e.time_range.start < since:
            continue
        kind = next((k for n, k in _NCCL_KERNELS.items() if n in name), None)
        if kind is not None:
            totals[kind] = totals.get(kind, 0.0) + e.time_range.elapsed_us()
    return totals


def dp_ops(events: list[Any], windows: list[Window]) -> list[OpRate]:
    """DataParallel's scatter / broadcast / gather / reduce-add per step (CUDA only)."""
    steps = max(1, len(windows))
    out: list[OpRate] = []
    for op, names in _DP_OPS.items():
        hits = [
            e
            for e in on_cpu(events)
            if e.name in names and any(w.holds(e.time_range.start) for w in windows)
        ]
        out.append(
            {
                "op": op,
                "count_per_step": len(hits) / steps,
                "ms_per_step": sum(e.time_range.elapsed_us() for e in hits) / 1e3 / steps,
            }
        )
    return out


def sync_points(events: list[Any], windows: list[Window]) -> float:
    """Host-side waits on the device per step (cuda*Synchronize calls)."""
    steps = max(1, len(windows))
    hits = sum(
        1
        for e in on_cpu(events)
        if e.name in _SYNC_NAMES and any(w.holds(e.time_range.start) for w in windows)
    )
    return hits / steps


def peak_live_cpu_bytes(trace: Path) -> int | None:
    """Peak of live CPU tensor bytes allocated while the profiler recorded memory, from its
    allocation and free records (what was live before recording is the baseline, 0).

    The profiler misses some frees: those made on threads it does not record (gloo's, freeing
    the copy its reduce-scatter makes of FSDP2's gradient). Its running total then never drops
    for them, and each such block stayed in the peak for the rest of the run (simple's fsdp rank
    read 9.96 to 15.92 MiB in three runs, 8.0 MiB without them). An address handed out again
    was freed in between: a block is taken as freed when its address is allocated anew.
    """
    records = json.loads(trace.read_text()).get("traceEvents", [])
    events = [
        e["args"]
        for e in sorted(records, key=lambda e: e.get("ts", 0))
        if e.get("name") == "[memory]" and e.get("args", {}).get("Device Type") == 0
    ]
    if not events:
        return None
    live: dict[Any, int] = {}  # address → bytes of the blocks allocated while recording
    level = peak = 0
    for e in events:
        size, address = int(e["Bytes"]), e.get("Addr")
        level -= live.pop(address, 0) if size > 0 else 0  # its earlier block, freed unseen
        if size > 0:
            live[address] = size
            level += size
        else:  # a free: of a block allocated while recording, or before (below the baseline)
            level -= live.pop(address, -size)
        peak = max(peak, level)
    return peak


def step_times(
    run_step: Callable[[], None], steps: int, synchronize: Callable[[], None]
) -> list[float]:
    """Wall seconds of each of ``steps`` calls, the device synchronised around each."""
    times = []
    for _ in range(steps):
        synchronize()
        start = time.perf_counter()
        run_step()
        synchronize()
        times.append(time.perf_counter() - start)
    return times


def timed_steps(run_step: Callable[[], None], steps: int, synchronize: Callable[[], None]) -> float:
    """Median wall seconds of ``steps`` calls, the device synchronised around each."""
    times = sorted(step_times(run_step, steps, synchronize))
    return times[len(times) // 2]


def export(prof: Any, path: Path) -> Path:
    """Write the Chrome trace. The exporter fails silently on a full disk: say so in one line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        full = no_room(exc, path)
        if full is None:
            raise
        raise full from None
    with _native_stderr_silenced():  # kineto's own "Failed to write" line: said below instead
        prof.export_chrome_trace(str(path))
    if not path.is_file():
        free = shutil.disk_usage(path.parent).free
        raise DpwiseError(
            f"the profiler could not write {path} ({free:,} bytes free there: no space left on "
            "device?); free space there or write elsewhere (--out)"
        )
    return path
