"""A hung peer: SIGSTOP one worker of `dpwise train --strategy ddp --nproc 2 --timeout T`.

Measures, from the SIGSTOP to the end of the command: the seconds it took, the exit code and the
rank its last line names, and whether any worker process is left. Target: with --timeout 30 the
run ends within 45 s naming the stopped rank (before --timeout existed: 632 s, naming rank 0).

Run: .venv/bin/python bench/hung_peer.py [--timeout 30] [--rank 1]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rpartition(")")[2].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _pids(tmp: Path) -> dict[int, int]:
    found = {}
    for path in tmp.glob("dpwise-launch-*/worker.*.pid"):
        if path.read_text():
            found[int(path.name.split(".")[1])] = int(path.read_text())
    return found


def trial(timeout: float, rank: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nproc", "2",
               "--epochs", "100000", "--timeout", str(timeout)]  # fmt: skip
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "TMPDIR": tmp})  # fmt: skip
        for line in proc.stdout:
            if line.startswith("epoch 1/"):
                break
        pids = _pids(Path(tmp))
        os.kill(pids[rank], signal.SIGSTOP)
        stopped = time.monotonic()
        _, err = proc.communicate(timeout=timeout + 600)
        seconds = time.monotonic() - stopped
        time.sleep(1)
        named = re.search(r"worker rank (\d+)", err.strip().splitlines()[-1])
        return {
            "seconds": seconds,
            "code": proc.returncode,
            "named": int(named.group(1)) if named else None,
            "left": [p for p in pids.values() if _alive(p)],
            "line": err.strip().splitlines()[-1],
        }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("--rank", type=int, default=1)
    args = p.parse_args()
    got = trial(args.timeout, args.rank)
    print(got["line"])
    print(
        f"SIGSTOP of rank {args.rank}, --timeout {args.timeout:g}: the run ended "
        f"{got['seconds']:.1f} s later (target {args.timeout + 15:g} s), exit code {got['code']}, "
        f"named rank {got['named']}, worker processes left: {len(got['left'])}"
    )


if __name__ == "__main__":
    main()
