"""What the simulation (`dpwise advise --simulate`) leaves out on a real GPU: each case run with
real CUDA tensors on one GPU, its process group still fake (N ranks, no-op collectives), the
tracker's peak (what the simulation reports) beside the CUDA caching allocator's peaks (active
and reserved bytes) and the CUDA context (the device memory the process holds beyond what the
allocator reserved). Needs a GPU; prints one JSON line per case.

Run: .venv/bin/python bench/simulate_calibration.py [--ranks 8] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

import torch

from dpwise.advise.cases import cases
from dpwise.advise.simulate_run import peak

SPEC = {
    "model": "transformer",
    "model_args": {"layers": 4, "dim": 512, "heads": 8, "vocab": 8000},
    "data": None,
    "data_args": {},
    "loss": "auto",
    "optimizer": "adamw",
    "momentum": 0.0,
}
ROWS = 8


def calibrate(ranks: int, precision: str) -> list[dict]:
    found = []
    for case in cases(precision):
        case = dataclasses.replace(case, device="cuda:0")
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_stats()
        got = peak(SPEC, case, ranks, ROWS, fake=False)
        free, total = torch.cuda.mem_get_info()
        held = total - free  # by every process on the GPU: run this one alone
        reserved_now = torch.cuda.memory_reserved()
        found.append({
            "case": case.row,
            "precision": precision,
            "ranks": ranks,
            "tracker_peak": got["Total"],
            "allocated_peak": torch.cuda.max_memory_allocated(),
            "reserved_peak": torch.cuda.max_memory_reserved(),
            "context": held - reserved_now,
        })  # fmt: skip
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--json", help="also write the lines to this file")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("needs a GPU: torch sees none", file=sys.stderr)
        return 2
    lines = calibrate(args.ranks, "fp32") + calibrate(args.ranks, "bf16")
    for line in lines:
        mib = {
            k: round(v / 2**20, 1) for k, v in line.items() if isinstance(v, int) and k != "ranks"
        }
        print(json.dumps({**line, **{f"{k}_mib": v for k, v in mib.items()}}))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(lines, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
