"""Wall-time budget of the default `dpwise compare` (what `make demo` runs).

Runs the command as a user would (a fresh process, start-up included), times it from outside, and
reads back how much of that time was spent inside training epochs; everything else — process
start-up, worker launch, data generation, profiling, checks, plots and report — is overhead.
Targets on a 2-core machine: wall ≤ 90 s, time outside training < 20 %.

Run: .venv/bin/python bench/compare_budget.py [extra compare arguments]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report"
        cmd = [
            sys.executable,
            "-m",
            "dpwise",
            "compare",
            "--quiet",
            "--out",
            str(out),
            *sys.argv[1:],
        ]
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode not in (0, 1):
            sys.exit(f"dpwise compare failed ({proc.returncode}): {proc.stderr.strip()}")
        results = json.loads((out / "results.json").read_text())
    timing, runs = results["timing"], results["runs"]
    training = timing["training_seconds"]
    print(
        f"dpwise compare (defaults: epochs {results['workload']['epochs']}, "
        f"repeats {results['workload']['repeats']}), {len(runs)} runs"
    )
    print(f"{'run':<24}{'wall s':>8}{'training s':>12}")
    for r in runs:
        print(f"{r['label']:<24}{r['wall_seconds']:>8.2f}{r['training_seconds']:>12.2f}")
    print(f"{'start-up, checks, report':<24}{wall - sum(r['wall_seconds'] for r in runs):>8.2f}")
    link = results.get("link_probe")
    if link:
        print(f"link probe of {link['run']} (inside its run's wall): {link['seconds']:.2f} s")
    print(f"total wall {wall:.1f} s (target ≤ 90 s)")
    print(
        f"inside training {training:.1f} s; outside training {wall - training:.1f} s = "
        f"{(wall - training) / wall:.1%} of wall (target < 20 %)"
    )


if __name__ == "__main__":
    main()
