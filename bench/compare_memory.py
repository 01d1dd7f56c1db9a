"""Memory of `dpwise compare` on a ViT-tiny-sized model at batch 256 (target: under 6 GiB).

Runs the command as a user would and samples /proc every 0.2 s: the peak RSS (VmHWM) of the
parent and of every process it starts, and the largest total RSS of all of them alive at once.
Also prints each run's own "peak RSS" column from results.json. Epochs, repeats and steps are
kept small: this measures memory, not speed. --kill-above GiB stops the command (and says so)
when the total passes that mark, to keep a shared machine safe.

Run: .venv/bin/python bench/compare_memory.py [--kill-above 9] [extra compare arguments]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GIB = 1024**3
TARGET_GIB = 6.0
BENCH = Path(__file__).parent
ARGS = [
    "--model", "vit_tiny:build", "--data", "vit_tiny:images", "--batch-size", "256",
    "--epochs", "2", "--repeats", "1", "--max-steps", "1", "--profile-steps", "1",
]  # fmt: skip
PLAIN_STEP = """
import resource, sys, torch, vit_tiny
model = vit_tiny.build({image})
x, y = vit_tiny.images(image={image})
torch.nn.functional.cross_entropy(model(x), y).backward()
torch.optim.SGD(model.parameters(), lr=0.01).step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def _status(pid: int) -> dict[str, int]:
    fields = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "PPid"):
                fields[key] = int(value.split()[0]) * (1024 if key != "PPid" else 1)
    except (OSError, ValueError):
        return {}
    return fields


def _tree(root: int) -> dict[int, dict[str, int]]:
    """root and every descendant: {pid: status fields}."""
    statuses = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = _status(int(entry.name))
            if fields:
                statuses[int(entry.name)] = fields
    family, grew = {root}, True
    while grew:
        grew = False
        for pid, fields in statuses.items():
            if pid not in family and fields.get("PPid") in family:
                family.add(pid)
                grew = True
    return {pid: statuses[pid] for pid in family if pid in statuses}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:60]
    except OSError:
        return "?"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kill-above", type=float, default=9.0, help="GiB, total of all processes")
    parser.add_argument("--image", type=int, default=224, help="image side in pixels")
    known, extra = parser.parse_known_args()
    extra += ["--model-arg", f"image={known.image}", "--data-arg", f"image={known.image}"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BENCH), os.environ.get("PYTHONPATH", "")]),
    }
    plain = subprocess.run(
        [sys.executable, "-c", PLAIN_STEP.format(image=known.image)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    plain_peak = int(plain.stdout.split()[-1])
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
            *ARGS,
            *extra,
        ]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
        hwm: dict[int, int] = {}
        names: dict[int, str] = {}
        total_peak, killed = 0, False
        while proc.poll() is None:
            tree = _tree(proc.pid)
            for pid, fields in tree.items():
                hwm[pid] = max(hwm.get(pid, 0), fields.get("VmHWM", 0))
                names.setdefault(pid, _cmdline(pid))
            total = sum(f.get("VmRSS", 0) for f in tree.values())
            total_peak = max(total_peak, total)
            if total > known.kill_above * GIB and not killed:
                killed = True
                for pid in tree:
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        wall = time.perf_counter() - start
        err = proc.stderr.read()
        results = out / "results.json"
        runs = json.loads(results.read_text())["runs"] if results.is_file() else []
    print(f"dpwise compare {' '.join(ARGS + extra)}")
    print(f"exit code {proc.returncode}, wall {wall:.0f} s")
    if killed:
        print(f"STOPPED: the processes together passed {known.kill_above:.1f} GiB")
    elif proc.returncode not in (0, 1):
        print(err.strip()[-2000:])
    owner = {pid: r["label"] for r in runs for pid in r.get("pids", [])}
    parent = hwm.get(proc.pid, 0)
    print(f"parent (pid {proc.pid}) peak RSS: {parent / GIB:.2f} GiB")
    for pid, peak in sorted(hwm.items()):
        if pid != proc.pid and peak > 50 * 2**20:
            who = owner.get(pid, names[pid])
            print(f"  process {pid:>7} peak RSS {peak / GIB:5.2f} GiB  {who}")
    for r in runs:
        rss = ", ".join(f"{b / GIB:.2f}" for b in r["memory"]["peak_rss_bytes"])
        print(f"  run {r['label']:<22} its peak RSS per process: {rss} GiB")
    print(f"one plain training step of the same model and batch, alone: {plain_peak / GIB:.2f} GiB")
    print(
        f"largest total of all processes alive at once: {total_peak / GIB:.2f} GiB "
        f"(target < {TARGET_GIB:.0f} GiB: {'met' if total_peak < TARGET_GIB * GIB else 'NOT met'})"
    )


if __name__ == "__main__":
    main()
