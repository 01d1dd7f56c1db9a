"""`dpwise tune` where communication is the bottleneck, and where it is not.

1. Two hosts (network namespaces) over a veth shaped to 200 Mbit/s, one DDP worker each on gloo,
   a model with 53.6 MiB of gradients (`--model-arg hidden=14000`: 1000 → 14000 → 10):
   `dpwise tune --allow-lossy --budget 10m` must find a configuration whose interval's lower
   end is at least 1.5× the default, within the budget; the same search without --allow-lossy
   reports the best lossless configuration or that none beats the default.
2. This machine over loopback (2 workers, the default model): no false win — the default is
   kept, or the winner's whole interval clears 1.05×.
Each search's own overhead (its wall time outside the configurations' trainings) must stay
under 20 % of its budget. Ratios are the search's own, measured side by side in its rounds.

Run (root, iproute2): .venv/bin/python bench/tune_link.py [--budget 10m] [--lossless-budget 10m]
    [--loopback-budget 3m] [--skip-link] [--skip-loopback]
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import netlab  # noqa: E402

PORT = 29733
MODEL = ["--model-arg", "hidden=14000", "--batch-size", "64"]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent / "src"), env.get("PYTHONPATH", "")])
    return env


def _tune(extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "dpwise", "tune", "--strategy", "ddp", *extra]


def _summary(label: str, doc: dict, wall: float) -> dict:
    w, t = doc["winner"], doc["timing"]
    print(f"== {label}")
    print(
        f"   wall {wall:.0f} s of a {t['budget_seconds']:.0f} s budget; rounds {doc['rounds']}; "
        f"stopped: {doc['stopped']}; overhead {t['overhead_share_of_budget']:.1%} of the budget"
    )
    print(f"   default: {doc['default']['seconds_per_step']:.3f} s per step")
    for c in doc["candidates"]:
        figures = "—"
        if c["ratio"] is not None:
            figures = f"{c['ratio']:.2f}× ({c['low']:.2f}–{c['high']:.2f}×)"
        print(f"   {c['name']:<28} {figures:<22} {c['outcome']}")
    shown = "default"
    if not w.get("is_default"):
        shown = f"{w['name']} {w['ratio']:.2f}× (low {w['low']:.2f}×)"
    print(f"   winner: {shown}")
    return doc


def link(budget: str, allow_lossy: bool) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp, netlab.NetPair(rate="200mbit") as net:
        endpoint = f"{net.addr['a']}:{PORT}"
        procs = {}
        start = time.perf_counter()
        for side in "ab":
            args = _tune(
                [
                    *MODEL,
                    "--nproc",
                    "1",
                    "--nnodes",
                    "2",
                    "--rdzv-endpoint",
                    endpoint,
                    "--threads",
                    "1",
                    "--budget",
                    budget,
                    "--quiet",
                    "--out",
                    f"{tmp}/{side}",
                    *(["--allow-lossy"] if allow_lossy else []),
                ]
            )
            procs[side] = net.popen(
                side, args, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        for side, proc in procs.items():
            _, err = proc.communicate(timeout=3600)
            if proc.returncode != 0:
                sys.exit(
                    f"host {side}: dpwise tune failed ({proc.returncode}): {err.strip()[-2000:]}"
                )
        wall = time.perf_counter() - start
        found = [
            Path(tmp, s, "results.json") for s in "ab" if Path(tmp, s, "results.json").is_file()
        ]
        return json.loads(found[0].read_text()), wall


def loopback(budget: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run(
            _tune(["--nproc", "2", "--budget", budget, "--quiet", "--out", tmp]),
            env=_env(),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            sys.exit(f"dpwise tune failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
        return json.loads(Path(tmp, "results.json").read_text()), time.perf_counter() - start


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--budget", default="10m")
    p.add_argument("--lossless-budget", default="10m")
    p.add_argument("--loopback-budget", default="3m")
    p.add_argument("--skip-link", action="store_true")
    p.add_argument("--skip-loopback", action="store_true")
    a = p.parse_args()
    failed = []
    if not a.skip_link:
        reason = netlab.unavailable_reason()
        if reason:
            sys.exit(f"two hosts cannot be made here: {reason}")
        doc, wall = link(a.budget, allow_lossy=True)
        _summary("200 Mbit/s, --allow-lossy", doc, wall)
        w = doc["winner"]
        if w.get("is_default") or (w["low"] or 0) < 1.5:
            failed.append(
                "200 Mbit/s --allow-lossy: no winner whose interval starts at 1.5× or more"
            )
        if wall > doc["timing"]["budget_seconds"] + 60:
            failed.append(f"200 Mbit/s --allow-lossy: {wall:.0f} s, past the budget")
        if doc["timing"]["overhead_share_of_budget"] >= 0.2:
            failed.append("200 Mbit/s --allow-lossy: overhead ≥ 20 % of the budget")
        doc, wall = link(a.lossless_budget, allow_lossy=False)
        _summary("200 Mbit/s, lossless only", doc, wall)
        if doc["winner"].get("lossy"):
            failed.append("200 Mbit/s lossless: a lossy winner without --allow-lossy")
        if doc["timing"]["overhead_share_of_budget"] >= 0.2:
            failed.append("200 Mbit/s lossless: overhead ≥ 20 % of the budget")
    if not a.skip_loopback:
        doc, wall = loopback(a.loopback_budget)
        _summary("loopback, 2 workers", doc, wall)
        w = doc["winner"]
        if not w.get("is_default") and (w["low"] or 0) < 1.05:
            failed.append("loopback: a winner whose interval does not clear 1.05×")
        if doc["timing"]["overhead_share_of_budget"] >= 0.2:
            failed.append("loopback: overhead ≥ 20 % of the budget")
    print("PASS" if not failed else "FAIL: " + "; ".join(failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
