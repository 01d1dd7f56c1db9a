"""Which OpenMP wait policy keeps a multi-threaded run steady when other jobs share the cores.

A run with several intra-op threads (compare's single run, --threads = the cores) synchronises
its threads at every op. GNU OpenMP's default lets a waiting thread spin before it sleeps; with
other processes on the cores, a spinning thread burns the time slice its partner needs. This
benchmark trains the default workload with `dpwise train --strategy single` (all cores' threads),
one process per measurement, under each wait policy, on a quiet machine and with CPU-bound
processes competing (one per core). Policies alternate within each round, so a change in the
machine's load hits them alike; each figure is the median throughput over the rounds.

Run: .venv/bin/python bench/omp_wait_policy.py [--rounds 3] [--epochs 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

POLICIES = {"default": None, "PASSIVE": "PASSIVE", "ACTIVE": "ACTIVE"}


def spinners(count: int) -> list[subprocess.Popen]:
    """CPU-bound competitors: plain Python loops, one per core wanted."""
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]


def rate(policy: str | None, epochs: int, threads: int) -> float:
    """Samples per second over the timed epochs (all but the first) of one training."""
    env = dict(os.environ)
    env.pop("OMP_WAIT_POLICY", None)
    if policy:
        env["OMP_WAIT_POLICY"] = policy
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "dpwise", "train", "--strategy", "single", "--quiet"]
        cmd += ["--epochs", str(epochs), "--threads", str(threads), "--out", out]
        subprocess.run(cmd, env=env, check=True)
        epochs_done = json.loads((Path(out) / "metrics.json").read_text())["epochs"][1:]
    return sum(e["samples"] for e in epochs_done) / sum(e["seconds"] for e in epochs_done)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    print(f"single run, {cores} threads, default workload, {args.epochs} epochs (first untimed)")
    table: dict[tuple[str, str], list[float]] = {}
    for load in ("quiet", "busy"):
        competitors = spinners(cores) if load == "busy" else []
        try:
            for _ in range(args.rounds):
                for name, policy in POLICIES.items():
                    value = rate(policy, args.epochs, cores)
                    table.setdefault((load, name), []).append(value)
        finally:
            for proc in competitors:
                proc.kill()
                proc.wait()
    print(f"{'machine':<8} {'OMP_WAIT_POLICY':<16} {'samples/s (median)':>19} {'vs default':>11}")
    for load in ("quiet", "busy"):
        base = statistics.median(table[(load, "default")])
        for name in POLICIES:
            value = statistics.median(table[(load, name)])
            print(f"{load:<8} {name:<16} {value:>19,.0f} {value / base:>10.2f}x")
    for name in POLICIES:
        kept = statistics.median(table[("busy", name)]) / statistics.median(table[("quiet", name)])
        print(f"{name}: busy keeps {kept:.0%} of quiet throughput")


if __name__ == "__main__":
    main()
