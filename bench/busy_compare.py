"""The default `dpwise compare` on a quiet machine and with CPU-bound jobs competing for its cores.

Two CPU-bound processes (plain Python loops) run beside the second comparison, as other jobs on a
shared machine would. For each comparison the benchmark prints how busy dpwise measured the
machine (results.json's ``load``), every run's speed-up over single against the most this CPU
can give it (compare.checks.contention), the speed and scalability checks, and the verdict. It
fails (exit 1) if a check passed a figure the hardware cannot produce, if the busy comparison
does not say the machine was busy, if either verdict recommends a parallel run on the CPU, or if
the two verdicts name different strategies.

Run: .venv/bin/python bench/busy_compare.py [--competitors 2] [-- extra compare flags]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from dpwise.compare.checks.contention import bound
from dpwise.results.document import Results


def compare(out: Path, extra: list[str], env: dict[str, str] | None = None) -> tuple[dict, float]:
    start = time.perf_counter()
    cmd = [sys.executable, "-m", "dpwise", "compare", "--quiet", "--out", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if proc.returncode not in (0, 1):  # 1: a check failed, which the figures below show
        sys.exit(f"compare failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "results.json").read_text()), time.perf_counter() - start


def report(name: str, raw: dict, seconds: float, cores: int) -> list[str]:
    """Print one comparison; return what it got wrong."""
    results = Results.from_json(raw)
    checks = {c.name: c for c in results.checks}
    load = raw.get("load") or {}
    share = (load.get("other_cpu_share") or {}).get("median")
    said = f"{share:.0%} of the cores" if share is not None else "not measured"
    print(f"\n== {name}: {seconds:.0f} s; other processes used {said} (busy: {load.get('busy')})")
    problems = []
    for run in results.runs[1:]:
        limit = bound(run, cores)
        possible = run.speedup_vs_single <= limit
        print(
            f"  {run.label:<10} {run.speedup_vs_single:6.2f}x single (at most {limit:.2f}x)"
            f"{'' if possible else '  <- not possible on this CPU'}"
        )
        if not possible and checks["speed"].status == "pass":
            problems.append(f"{name}: speed passed {run.label} at {run.speedup_vs_single:.2f}x")
        if not possible and run.world_size > 1 and checks["scalability"].status == "pass":
            problems.append(f"{name}: scalability passed {run.label}")
    for check in ("speed", "scalability"):
        print(f"  {check}: {checks[check].status}: {checks[check].summary[:160]}")
    rec = results.recommendation
    print(f"  verdict: {rec['strategy']} ({rec['status']}): {rec['headline']}")
    if rec.get("inconclusive_reason"):
        print(f"    because {rec['inconclusive_reason'][:200]}")
    if rec["strategy"] != "single":
        problems.append(f"{name}: recommended {rec['strategy']} on the CPU")
    return problems


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--competitors", type=int, default=2)
    parser.add_argument(
        "--spinning",
        action="store_true",
        help="a third comparison, busy, with OMP_WAIT_POLICY=ACTIVE (threads spin while they "
        "wait: the single run collapses, and the figures that makes must be named contention)",
    )
    parser.add_argument("extra", nargs="*", help="flags for both comparisons")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    problems = []
    with tempfile.TemporaryDirectory() as root:
        quiet, quiet_s = compare(Path(root) / "quiet", args.extra)
        problems += report("quiet", quiet, quiet_s, cores)
        loops = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.competitors)
        ]
        try:
            busy, busy_s = compare(Path(root) / "busy", args.extra)
            if args.spinning:
                spin, spin_s = compare(
                    Path(root) / "spin", args.extra, {"OMP_WAIT_POLICY": "ACTIVE"}
                )
        finally:
            for proc in loops:
                proc.kill()
                proc.wait()
        problems += report(f"busy ({args.competitors} competitors)", busy, busy_s, cores)
        if args.spinning:
            problems += report("busy, OMP_WAIT_POLICY=ACTIVE", spin, spin_s, cores)
    if not (busy.get("load") or {}).get("busy"):
        problems.append("the busy comparison did not say the machine was busy")
    if quiet["recommendation"]["strategy"] != busy["recommendation"]["strategy"]:
        problems.append("the quiet and busy verdicts name different strategies")
    print(
        "\nOK: every passed figure is possible, the load is said, the verdict holds"
        if not problems
        else "\nPROBLEMS:\n  " + "\n  ".join(problems)
    )
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
