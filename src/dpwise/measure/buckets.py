"""The gradient all-reduces a DDP step launched: each bucket's bytes and when it was launched.

Read from the profiler: the dispatcher's ``c10d::allreduce_`` request marks the moment DDP handed
a bucket over (its launch, on the host), the backend event paired with it carries the bucket's
shape. A bucket's ``ready_ms`` is how long before the step's LAST launch it was launched: the last
bucket goes when backward reaches the first layers, so ``ready_ms`` is the backward time left to
hide that bucket's all-reduce behind. On CUDA these are host times: where the host runs ahead
of the GPU, launches come earlier than the gradients are ready on the device.
"""

from __future__ import annotations

import statistics
from typing import Any

from dpwise.measure.profile import Window, backend_kinds


def _launches(events: list[Any], window: Window, element_size: int) -> list[tuple[float, int]]:
    """(launch µs, bytes) of each all-reduce launched inside ``window``, in launch order."""
    out = []
    for event, kind, request in backend_kinds(events):
        launched = (request or event).time_range.start
        if kind != "all_reduce" or not window.holds(launched):
            continue
        elements = sum(_count(shape) for shape in event.input_shapes or [])
        out.append((launched, elements * element_size))
    return sorted(out)


def _count(shape: Any) -> int:
    if not isinstance(shape, (list, tuple)) or not shape:
        return 0
    if not all(isinstance(d, int) for d in shape):
        return 0
    total = 1
    for dim in shape:
        total *= dim
    return total


def step_buckets(
    events: list[Any], windows: list[Window], element_size: int
) -> list[dict[str, float]]:
    """[{"bytes", "ready_ms"}] in launch order, the median over the measured steps.

    Steps that launched a different number of all-reduces than most steps did are left out (a
    step where DDP rebuilt its buckets); no all-reduce at all gives [].
    """
    per_step = [_launches(events, w, element_size) for w in windows]
    per_step = [s for s in per_step if s]
    if not per_step:
        return []
    usual = statistics.mode(len(s) for s in per_step)
    steps = [s for s in per_step if len(s) == usual]
    out = []
    for i in range(usual):
        out.append(
            {
                "bytes": int(statistics.median(s[i][1] for s in steps)),
                "ready_ms": statistics.median((s[-1][0] - s[i][0]) / 1e3 for s in steps),
            }
        )
    return out
