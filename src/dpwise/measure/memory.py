"""Peak memory per device: CUDA's allocator peak, or the process's peak RSS on the CPU."""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import torch


def reset_peaks(devices: list[torch.device]) -> None:
    for device in devices:
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)


def _peak_rss_bytes() -> int:
    import resource  # POSIX only; imported where used

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # Linux reports KiB


_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")


def reset_peak_rss() -> bool:
    """Reset the kernel's high-water mark of this process's RSS (Linux); False where impossible."""
    try:
        _CLEAR_REFS.write_text("5")
    except OSError:
        return False
    return True


def peak_rss_since_reset() -> int:
    """VmHWM: the RSS high-water mark since the last reset (or process start)."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return _peak_rss_bytes()


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


@functools.cache
def _glibc() -> Any:
    """The C library where it is glibc (malloc_trim, mallopt), else None."""
    import ctypes

    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim, libc.mallopt  # noqa: B018  (absent outside glibc)
    except (OSError, AttributeError):
        return None
    return libc


def release_freed(collect: bool = True) -> None:
    """Hand memory freed by Python and the allocator back to the OS (glibc's malloc_trim);
    ``collect`` first runs the cycle collector (tens of ms in a process that imported torch)."""
    import gc

    if collect:
        gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
    libc = _glibc()
    if libc is not None:  # not glibc: nothing to trim
        libc.malloc_trim(0)


_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
_MMAP_FROM_BYTES = 128 * 1024


def return_large_blocks() -> bool:
    """From now on, serve blocks of 128 KiB and more with their own mappings (glibc): freed, they
    go back to the system at once instead of staying in a heap that small allocations pin.
    Fixing the threshold ends glibc's own tuning of it for this process, and costs a page fault
    per large allocation: for a process's last measurement, never before timed steps.
    False where the C library has no mallopt."""
    libc = _glibc()
    return libc is not None and bool(libc.mallopt(_M_MMAP_THRESHOLD, _MMAP_FROM_BYTES))
