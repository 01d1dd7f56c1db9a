"""How well the scaling projection predicts ddp × n across n real hosts (2 or 4), link by link.

For each workload: `dpwise compare` measures ddp × n on this machine (the per-device compute, the
gradient bytes, DDP's buckets as launched). Then for each link shape: n network namespaces become
n hosts (tests/netlab.py): two joined by a veth pair, or --hosts 4 on one bridge, each host's veth
to it shaped; shaping is tc's, on both ends of each veth. `dpwise probe-link` measures the links
between the hosts; the projection (`project_ddp` on that probe, at n) predicts the step time;
`dpwise train --strategy ddp --nnodes n --nproc 1` across the hosts measures it (the median step
of the epochs after the first). The benchmark prints each case's projected and measured step, the
error, and the probe's large-message busbw against the configured rate.

Targets: |error| ≤ 15 % in every case; the probe's busbw within 10 % of the tc rate.
A delay case runs where tc's netem exists (this project's machine has no netem: it says so).
Needs root (namespaces); every namespace, veth and qdisc is removed, also on failure or Ctrl-C.

Run: .venv/bin/python bench/projection_accuracy.py [--hosts 2|4] [--workloads simple,transformer]
     [--rates 50mbit,100mbit,200mbit,1gbit] [--delay 2ms@200mbit]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import netlab  # noqa: E402
from dpwise.projection.inputs import inputs_from_results  # noqa: E402
from dpwise.projection.links import link_from_probe  # noqa: E402
from dpwise.projection.model import project_ddp  # noqa: E402

PORT = 29400
EPOCHS = {"simple": 3, "transformer": 6}  # the first is a warm-up; about 8+ timed seconds each
LIMIT_S = 600
ERROR_TARGET, PROBE_TARGET = 0.15, 0.10


def dpwise(*args: str) -> list[str]:
    return [sys.executable, "-m", "dpwise", *args]


def compare(workload: str, hosts: int, out: Path) -> dict:
    cmd = dpwise("compare", "--model", workload, "--strategies", "single,ddp", "--world-sizes",
                 str(hosts), "--quiet", "--out", str(out))  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=LIMIT_S)
    if done.returncode not in (0, 1):  # 1: a check warned, the figures are there
        sys.exit(f"dpwise compare --model {workload} failed: {done.stderr.strip()[-800:]}")
    return json.loads((out / "results.json").read_text())


Net = netlab.NetPair | netlab.NetHosts


def on_every_host(net: Net, args: list[str]) -> list[str]:
    """Run the same command on every host; return their outputs (fail on a non-zero exit)."""
    procs = [
        net.popen(side, args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for side in net.sides
    ]
    outs = [p.communicate(timeout=LIMIT_S)[0] for p in procs]
    for side, proc, out in zip(net.sides, procs, outs, strict=True):
        if proc.returncode != 0:
            sys.exit(f"host {side}: {' '.join(args[2:5])} exited {proc.returncode}: {out[-1500:]}")
    return outs


def multinode(net: Net, port: int) -> list[str]:
    endpoint = f"{net.addr['a']}:{port}"
    nnodes = str(len(net.sides))
    return ["--nnodes", nnodes, "--nproc", "1", "--rdzv-endpoint", endpoint, "--timeout", "120"]


def probe(net: Net, max_bytes: int, out: Path) -> dict:
    args = dpwise("probe-link", "--max-bytes", str(max_bytes), "--out", str(out),
                  *multinode(net, PORT))  # fmt: skip
    on_every_host(net, args)
    return json.loads(out.read_text())


def measured_step_ms(net: Net, workload: str, out: Path) -> float:
    args = dpwise("train", "--strategy", "ddp", "--model", workload, "--threads", "1",
                  "--epochs", str(EPOCHS[workload]), "--quiet", "--overwrite", "--out", str(out),
                  *multinode(net, PORT + 1))  # fmt: skip
    on_every_host(net, args)
    epochs = json.loads((out / "metrics.json").read_text())["epochs"][1:]
    return statistics.median(e["seconds"] / e["steps"] for e in epochs) * 1e3


def large_busbw(probe_result: dict) -> float:
    """busbw of the largest all-reduce, bytes/s."""
    points = probe_result["ops"]["all_reduce"]["points"]
    return max(points, key=lambda p: p["bytes"])["busbw_bytes_per_s"]


def hosts_net(hosts: int, shape: dict) -> Net:
    """Two hosts joined by a veth pair, or more on one bridge; each link shaped as ``shape``."""
    rate, delay = shape.get("rate"), shape.get("delay")
    if hosts == 2:
        return netlab.NetPair(rate=rate, delay=delay)
    return netlab.NetHosts(hosts, rate=rate, delay=delay)


def case(workload: str, hosts: int, results: dict, shape: dict, tmp: Path) -> dict:
    inputs = inputs_from_results(results)
    assert inputs.measured_world == hosts, (inputs.measured_world, hosts)
    with hosts_net(hosts, shape) as net:
        found = probe(net, max(4 * inputs.gradient_bytes, 8 << 20), tmp / "probe.json")
        measured = measured_step_ms(net, workload, tmp / "train")
    point = project_ddp(inputs, link_from_probe(found), hosts)
    projected = point.step_ms
    row = {"workload": workload, "hosts": hosts, **shape, "projected_ms": projected,
           "measured_ms": measured, "compute_ms": point.compute_ms, "exposed_ms": point.exposed_ms,
           "probe_points": found["ops"]["all_reduce"]["points"][-4:],
           "error": projected / measured - 1, "busbw_bytes_per_s": large_busbw(found)}  # fmt: skip
    if shape.get("rate"):
        row["busbw_vs_rate"] = row["busbw_bytes_per_s"] * 8 / netlab._rate_bits(shape["rate"]) - 1
    return row


def shapes(args: argparse.Namespace) -> list[dict]:
    out = [{"rate": r} for r in args.rates.split(",") if r]
    if args.delay:
        delay, _, rate = args.delay.partition("@")
        out.append({"delay": delay, "rate": rate or None})
    return out


def show(row: dict) -> str:
    link = row.get("rate") or "unshaped"
    if row.get("delay"):
        link += f" +{row['delay']}"
    probe_said = f"{row['busbw_bytes_per_s'] * 8 / 1e6:8.1f} Mbit/s"
    if "busbw_vs_rate" in row:
        probe_said += f" ({row['busbw_vs_rate']:+.1%})"
    return (f"{row['workload']:<12} {link:<16} {probe_said:<26} {row['projected_ms']:10.1f} "
            f"{row['measured_ms']:10.1f} {row['error']:+8.1%}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, choices=(2, 4), default=2)
    parser.add_argument("--workloads", default="simple,transformer")
    parser.add_argument("--rates", default="50mbit,100mbit,200mbit,1gbit")
    parser.add_argument("--delay", default="2ms@200mbit", help="DELAY@RATE ('' for none)")
    parser.add_argument("--json", type=Path, help="write the rows here too")
    args = parser.parse_args()
    reason = netlab.unavailable_reason()
    if reason:
        sys.exit(f"projection_accuracy: {reason}")
    chosen = shapes(args)
    if any(s.get("delay") for s in chosen) and not netlab.NetPair.can_delay():
        print("delay case: not run: this kernel has no tc netem qdisc (only tbf shapes rate)")
        chosen = [s for s in chosen if not s.get("delay")]
    print(f"step ms of ddp × {args.hosts} across {args.hosts} hosts:")
    print(f"{'workload':<12} {'link (tc)':<16} {'probe busbw (vs rate)':<26} "
          f"{'projected':>10} {'measured':>10} {'error':>8}")  # fmt: skip
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for workload in args.workloads.split(","):
            results = compare(workload, args.hosts, Path(tmp) / f"compare-{workload}")
            for shape in chosen:
                rows.append(case(workload, args.hosts, results, shape, Path(tmp)))
                print(show(rows[-1]), flush=True)
    worst = max(abs(r["error"]) for r in rows)
    probes = [abs(r["busbw_vs_rate"]) for r in rows if "busbw_vs_rate" in r]
    print(f"worst projection error {worst:.1%} (target ≤ {ERROR_TARGET:.0%}); worst probe "
          f"busbw vs rate {max(probes, default=0):.1%} (target ≤ {PROBE_TARGET:.0%})")  # fmt: skip
    print(f"namespaces left behind: {netlab.leftovers() or 'none'}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0 if worst <= ERROR_TARGET and max(probes, default=0) <= PROBE_TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
