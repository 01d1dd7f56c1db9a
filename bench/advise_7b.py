"""`dpwise advise` on a 7-billion-parameter configuration of the built-in transformer.

Times the command as a user runs it (a fresh process) and reports its peak RSS: the model is
built on the meta device, so its ~26 GB of fp32 weights are never allocated. Target: < 5 s.

Run: .venv/bin/python bench/advise_7b.py
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

ARGS = [
    "advise",
    "--json",
    "--gpus",
    "8",
    "--precision",
    "bf16",
    "--model",
    "transformer",
    "--model-arg",
    "layers=32",
    "--model-arg",
    "dim=4096",
    "--model-arg",
    "heads=32",
    "--model-arg",
    "vocab=32000",
]


def main() -> None:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "dpwise", *ARGS], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(proc.stderr)
    answer = json.loads(proc.stdout)
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    params = answer["model"]["parameters"]
    method = answer["model"]["method"]
    print(f"dpwise {' '.join(ARGS)}\n{params / 1e9:.2f} B parameters, measured by {method}")
    print(f"answer: {answer['strategy']} (rule {answer['rule']})")
    print(
        f"wall {wall:.2f} s (target < 5 s); peak RSS {rss:.2f} GiB "
        f"(the fp32 weights alone would be {4 * params / 1024**3:.1f} GiB)"
    )


if __name__ == "__main__":
    main()
