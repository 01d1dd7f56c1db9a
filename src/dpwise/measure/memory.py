"""Peak memory per device: CUDA's allocator peak, or the process's peak RSS on the CPU."""

from __future__ import annotations

import resource
import sys

import torch


def reset_peaks(devices: list[torch.device]) -> None:
    for device in devices:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)


def _peak_rss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


def peaks(devices: list[torch.device]) -> list[dict[str, object]]:
    """One record per device: ``{device, bytes, kind}`` (kind says what was measured)."""
    out: list[dict[str, object]] = []
    for device in devices:
        if device.type == "cuda":
            out.append(
                {
                    "device": str(device),
                    "bytes": int(torch.cuda.max_memory_allocated(device)),
                    "kind": "cuda_max_memory_allocated",
                }
            )
        else:
            out.append({"device": str(device), "bytes": _peak_rss_bytes(), "kind": "cpu_peak_rss"})
    return out
