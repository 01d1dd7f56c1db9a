"""A SLURM job whose first node never starts: `dpwise train` on node 1 of 2 (one task per node),
two network-namespace hosts with their own names (tests/netlab.py), node 0 (the store's host,
first in the node list) never started.

Measures, from the start of node 1 to its end: the seconds it took, its exit code, its last line
and whether a traceback was printed. Target: one line, exit 1, no traceback, after the meeting
time (--timeout, at least 60 s) and well before torch's own 600 s join timeout. Before dpwise
checked it: 93.9 s and a 90-line RendezvousConnectionError traceback. Too long for a unit test
(the meeting time alone is 60 s): run it by hand, as root.

Run: .venv/bin/python bench/dead_peer.py [--trials 1] [--timeout 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import netlab  # noqa: E402

SLURM = {"SLURM_JOB_ID": "4242", "SLURM_JOB_NAME": "job", "SLURM_STEP_ID": "0",
         "SLURM_NNODES": "2", "SLURM_NTASKS": "2", "SLURM_NODEID": "1", "SLURM_PROCID": "1",
         "SLURM_LOCALID": "0", "SLURM_NTASKS_PER_NODE": "1"}  # fmt: skip
MEETING_S = 60  # the least time the nodes wait to meet (launch.elastic)


def trial(timeout: int) -> dict[str, object]:
    with netlab.NetPair(named=True) as net:
        # no name server inside: c10d's look-ups of its own address fail at once, not after the
        # host's resolver times out on a network the namespace cannot reach
        resolv = Path("/etc/netns") / net.ns["b"] / "resolv.conf"
        resolv.write_text("nameserver 127.0.0.1\n")
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith(("TORCHELASTIC", "LOCAL_", "SLURM_", "PET_", "OMPI_"))
        }
        env.update(SLURM, SLURM_JOB_NODELIST=net.hostlist)
        argv = [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nproc", "1",
                "--max-steps", "2", "--timeout", str(timeout)]  # fmt: skip
        started = time.monotonic()
        node = net.popen("b", argv, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)  # fmt: skip
        out, _ = node.communicate(timeout=MEETING_S + 600)
        took = time.monotonic() - started
    lines = out.strip().splitlines() or [""]
    return {"seconds": round(took, 1), "exit": node.returncode, "last": lines[-1][:200],
            "traceback": "Traceback" in out, "lines": len(lines)}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--timeout", type=int, default=20)
    args = parser.parse_args()
    if (why := netlab.unavailable_reason()) is not None:
        print(f"dead_peer: no network namespaces here ({why})")
        return 2
    ok = True
    for n in range(args.trials):
        got = trial(args.timeout)
        print(f"trial {n + 1}: {got}")
        ok &= got["exit"] == 1 and not got["traceback"] and got["seconds"] >= MEETING_S
        ok &= str(got["last"]).startswith("dpwise: this node could not reach the rendezvous")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
