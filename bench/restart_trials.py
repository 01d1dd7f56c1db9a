"""Elastic restart trials: kill -9 a worker at a random moment; does the run resume and match?

Runs `dpwise train --strategy ddp --nproc 2 --max-restarts 1 --checkpoint-every 5 --epochs 4`
once uninterrupted, then --trials times with a kill -9 of a random worker at a random moment
between the first checkpoint and the last (the training window of the uninterrupted run).
A trial counts when the run exits 0, rank 0 said "restart 1: resuming from step N of
checkpoint.pt", and final.pt equals the uninterrupted run's within 1e-6 (max abs diff).

    python bench/restart_trials.py [--trials 10] [--epochs 4]

prints one line per trial and `10/10 resumed and matched (max diff 0.0e+00)`.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
RESUMED = re.compile(r"^restart 1: resuming from step (\d+) of checkpoint\.pt$", re.M)


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCHELASTIC", "LOCAL_"))}
    for key in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "GROUP_RANK"):
        env.pop(key, None)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    return env


def _workers(launcher: int) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            parent = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if parent == launcher and b"resource_tracker" not in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def run(out: Path, epochs: int, delay: float | None) -> tuple[int, str, int, float]:
    """(exit code, stderr, killed pid or 0, seconds from the first checkpoint to the last)."""
    args = [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nproc", "2"]
    args += ["--max-restarts", "1", "--checkpoint-every", "5", "--epochs", str(epochs)]
    args += ["--quiet", "--out", str(out)]
    proc = subprocess.Popen(args, stderr=subprocess.PIPE, text=True, env=_env())
    while not (out / "checkpoint.pt").exists() and proc.poll() is None:
        time.sleep(0.01)
    first = time.time()
    victim = 0
    if delay is not None:
        time.sleep(delay)
        workers = _workers(proc.pid)
        if workers:
            victim = random.choice(workers)
            os.kill(victim, signal.SIGKILL)
    _, stderr = proc.communicate(timeout=600)
    last = (out / "checkpoint.pt").stat().st_mtime if (out / "checkpoint.pt").exists() else first
    return proc.returncode, stderr, victim, last - first


def max_diff(a: Path, b: Path) -> float:
    x, y = (torch.load(p, map_location="cpu", weights_only=True) for p in (a, b))
    return max((x[k] - y[k]).abs().max().item() for k in x)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--seed", type=int, help="seed of the kill moments (default: random)")
    opts = parser.parse_args()
    random.seed(opts.seed)
    with tempfile.TemporaryDirectory(prefix="dpwise-restart-") as tmp:
        ref = Path(tmp, "straight")
        code, err, _, window = run(ref, opts.epochs, None)
        if code != 0:
            sys.exit(f"the uninterrupted run failed:\n{err}")
        print(f"uninterrupted: {window:.1f} s from the first checkpoint to the last", flush=True)
        good, diffs = 0, []
        for trial in range(1, opts.trials + 1):
            out = Path(tmp, f"trial{trial}")
            delay = random.uniform(0.0, window)
            code, err, victim, _ = run(out, opts.epochs, delay)
            resumed = RESUMED.findall(err)
            diff = max_diff(ref / "final.pt", out / "final.pt") if code == 0 else float("nan")
            ok = code == 0 and victim and len(resumed) == 1 and diff <= 1e-6
            good += bool(ok)
            diffs += [diff] if code == 0 else []
            step = resumed[0] if resumed else "-"
            last = err.strip().splitlines()[-1] if err.strip() and not ok else ""
            print(
                f"trial {trial}: kill at +{delay:.2f} s (pid {victim or 'none'}), exit {code}, "
                f"resumed from step {step}, max diff {diff:.1e} {'ok' if ok else 'FAILED ' + last}",
                flush=True,
            )
    worst = max(diffs) if diffs else float("nan")
    print(f"{good}/{opts.trials} resumed and matched (max diff {worst:.1e})")


if __name__ == "__main__":
    main()
