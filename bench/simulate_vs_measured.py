"""The simulation (`dpwise advise --simulate`) against dpwise's own measured runs at 2 ranks on the
CPU: for each built-in model, the busiest rank's simulated peak for ddp, ddp+zero1 and fsdp beside
the peak live CPU tensor bytes dpwise measured for the same strategy, global batch, optimizer
(AdamW) and precision (fp32), with the difference as a share of the measured figure.

How, per model (each a dpwise command of its own, in a process of its own):
- simulated: `dpwise advise --gpus 0 --model M --batch-size B --simulate --json` (the CPU: world
  size 2; real tensors, a fake process group, torch's MemTracker / FSDPMemTracker; the second
  step's peak);
- ddp, fsdp measured: `dpwise compare --strategies ddp,fsdp --world-sizes 2 --optimizer adamw`
  (the profiled probe: torch.profiler's memory records from the model's construction through
  2 warm-up and --profile-steps steps, gloo; each rank's peak, the busiest shown);
- ddp+zero1 measured: compare has no ZeRO-1 option; `dpwise tune --strategy ddp --knobs zero1
  --nproc 2` records the default's (ddp) and ZeRO-1's peak live tensor bytes the same way on its
  first round (construction and 2 warm-up steps, the busier of the 2 processes). Its ddp figure
  is shown too, as a second measurement of ddp.

Targets: none to meet; the gaps are reported and explained, not tuned away. A last column reads
rank 0's compare trace again: the profiler's CPU memory records miss a free made on a thread it
does not record (gloo's), so such a block stays counted until the run ends; "missed" is the bytes
of blocks allocated before the peak whose address was allocated again with no free recorded in
between, and "less" the peak without them (as if each was gone by the peak).

Run: .venv/bin/python bench/simulate_vs_measured.py [--models simple,transformer,cnn]
     [--batch-size 64] [--out DIR] [--json FILE]    (about 1 to 2 minutes a model on 2 cores)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CASES = ("ddp", "ddp+zero1", "fsdp")
WORLD = 2
MIB = 2**20


def dpwise(*args: str, allowed: tuple[int, ...] = (0,)) -> str:
    """One dpwise command; its stdout (another exit code: its last lines, and the bench stops)."""
    cmd = [sys.executable, "-W", "ignore", "-m", "dpwise", *args]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode not in allowed:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise SystemExit(f"{' '.join(cmd[3:])} failed ({done.returncode}):\n{tail}")
    return done.stdout


def simulated(model: str, batch: int) -> dict[str, dict[str, Any]]:
    """The simulation's row for each case: peak, categories, the rank simulated, tensors."""
    said = dpwise("advise", "--gpus", "0", "--model", model, "--batch-size", str(batch),
                  "--optimizer", "adamw", "--simulate", "--json")  # fmt: skip
    got = json.loads(said)
    return {case: got["simulated"][case] for case in CASES}


def compared(model: str, batch: int, out: Path) -> dict[str, dict[str, Any]]:
    """compare's ddp and fsdp runs at 2 processes: each rank's peak and rank 0's trace."""
    dpwise("compare", "--model", model, "--strategies", "ddp,fsdp", "--world-sizes",
           str(WORLD), "--batch-size", str(batch), "--optimizer", "adamw", "--precision",
           "fp32", "--epochs", "2", "--repeats", "1", "--max-steps", "4", "--quiet",
           "--out", str(out), allowed=(0, 1))  # fmt: skip
    # exit 1: a check failed (the transformer's convergence under AdamW at lr 0.01); the runs
    # and their memory are measured all the same
    doc = json.loads((out / "results.json").read_text())
    failed = [c["name"] for c in doc["checks"] if c["status"] == "fail"]
    if failed:
        print(f"{model}: compare's checks that failed: {', '.join(failed)}", file=sys.stderr)
    found = {}
    for run in doc["runs"]:
        if run["strategy"] in CASES and run["world_size"] == WORLD:
            mem = run["memory"]
            assert mem["kind"] == "cpu_live_tensors", mem["kind"]
            ranks = [d["peak_bytes"] for d in mem["per_device"]]
            found[run["strategy"]] = {"ranks": ranks, "trace": out / run["trace"]}
    return found


def tuned(model: str, batch: int, out: Path) -> dict[str, int | None]:
    """tune's first-round peaks (the busier process) of the default (ddp) and of ZeRO-1."""
    dpwise("tune", "--model", model, "--strategy", "ddp", "--knobs", "zero1", "--nproc",
           str(WORLD), "--device", "cpu", "--batch-size", str(batch), "--optimizer", "adamw",
           "--precision", "fp32", "--budget", "90s", "--quiet", "--out", str(out))  # fmt: skip
    doc = json.loads((out / "results.json").read_text())
    zero1 = [c for c in doc["candidates"] if c["config"].get("zero1")]
    return {"ddp": doc["default"]["peak_memory"],
            "ddp+zero1": zero1[0]["peak_memory"] if zero1 else None}  # fmt: skip


def missed_frees(trace: Path) -> dict[str, int]:
    """A compare trace's CPU memory records read again: the live peak as compare computes it
    (profile.peak_live_cpu_bytes), and the bytes of blocks allocated before that peak whose
    address was allocated again with no free recorded in between (frees the profiler missed:
    the peak counts them as live from their allocation on, whenever they were freed)."""
    every = json.loads(trace.read_text()).get("traceEvents", [])
    cpu = [e for e in every if e.get("name") == "[memory]"]
    events = [e for e in cpu if e.get("args", {}).get("Device Type") == 0]
    events.sort(key=lambda e: e["ts"])
    base = events[0]["args"]["Total Allocated"] - events[0]["args"]["Bytes"]
    live: dict[int, tuple[int, float]] = {}
    missed: list[tuple[int, float]] = []  # (bytes, when allocated)
    peak, peak_at = 0, 0.0
    for e in events:
        addr, size = e["args"]["Addr"], e["args"]["Bytes"]
        if size > 0:
            if addr in live:
                missed.append(live[addr])
            live[addr] = (size, e["ts"])
        else:
            live.pop(addr, None)
        if e["args"]["Total Allocated"] - base > peak:
            peak, peak_at = e["args"]["Total Allocated"] - base, e["ts"]
    before = sum(size for size, at in missed if at < peak_at)
    return {"peak": peak, "missed": before, "peak_less_missed": peak - before}


def rows(model: str, batch: int, out: Path) -> list[dict[str, Any]]:
    """The table's rows for one model: each case's simulated and measured figures."""
    sims = simulated(model, batch)
    runs = compared(model, batch, out / f"compare-{model}")
    tune = tuned(model, batch, out / f"tune-{model}")
    found = []
    for case in CASES:
        sim = sims[case]
        row = {"model": model, "case": case, "simulated": sim["peak_bytes"],
               "sim_rank": sim["rank"], "tensors": sim["tensors"],
               "by_category": sim["by_category"], "tune": tune.get(case)}  # fmt: skip
        if case in runs:
            row.update(ranks=runs[case]["ranks"], measured=max(runs[case]["ranks"]), by="compare",
                       trace=missed_frees(runs[case]["trace"]))  # fmt: skip
        else:
            row.update(ranks=None, measured=tune[case], by="tune", trace=None)
        found.append(row)
    return found


def _mib(n: int | None) -> str:
    return "–" if n is None else f"{n / MIB:.2f}"


def show(table: list[dict[str, Any]]) -> None:
    print(f"{'model':<12}{'case':<10}{'sim MiB':>8}{'measured':>9}{'by':>8}{'off':>7}"
          f"{'rank 0 / rank 1':>16}{'tune':>7}{'r0 missed':>10}{'r0 less':>8}")  # fmt: skip
    for r in table:
        off = (r["simulated"] - r["measured"]) / r["measured"] if r["measured"] else None
        ranks = " / ".join(_mib(b) for b in r["ranks"]) if r["ranks"] else "–"
        t = r["trace"] or {}
        print(f"{r['model']:<12}{r['case']:<10}{_mib(r['simulated']):>8}{_mib(r['measured']):>9}"
              f"{r['by']:>8}{'–' if off is None else f'{off:+.1%}':>7}{ranks:>16}"
              f"{_mib(r['tune']):>7}{_mib(t.get('missed')):>10}"
              f"{_mib(t.get('peak_less_missed')):>8}")  # fmt: skip
    print(
        "off: (simulated − measured) / measured; measured: the busiest rank; tune: tune's "
        "first-round peak (the busier process); r0 missed: rank 0's compare trace, blocks "
        "allocated before its peak whose free the profiler missed; r0 less: its peak less them"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="simple,transformer,cnn")
    parser.add_argument("--batch-size", type=int, default=64, help="GLOBAL batch")
    parser.add_argument("--out", help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out or tmp)
        table = [r for m in args.models.split(",") for r in rows(m, args.batch_size, out)]
    show(table)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(table, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
