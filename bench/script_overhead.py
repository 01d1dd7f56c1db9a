"""What `compare --script` costs a step: the same script run bare and under dpwise's harness with
its measurements on (the meter's hooks and digests, the step hooks; the profiled launch is a
launch of its own and not counted here).

The script is the guide's shape (SimpleModel 1000→512→10, batch 256) and times itself: it writes
the time at the end of every optimizer step, so both runs are timed the same way, by the script.
Rounds alternate the two, bare first in even rounds, harness first in odd ones; each round's
ratio is the harness's median step time over the bare run's (steps after WARM untimed). Target
(issue 36): at most 1.03.

Run: .venv/bin/python bench/script_overhead.py [--rounds 7] [--steps 60]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from dpwise.measure.stats import median_interval
from dpwise.userscript.run import launch_script

WARM = 10
SCRIPT = """\
import sys, time, torch
from torch import nn
steps, out = int(sys.argv[1]), open(sys.argv[2], "w")
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Linear(512, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.CrossEntropyLoss()
x, y = torch.randn(4096, 1000), torch.randint(0, 10, (4096,))
for step in range(steps):
    rows = torch.randint(0, 4096, (256,))
    loss = loss_fn(model(x[rows]), y[rows])
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(time.perf_counter(), file=out, flush=True)
"""


def step_median(times: Path) -> float:
    ends = [float(line) for line in times.read_text().split()]
    return statistics.median(b - a for a, b in zip(ends[WARM:], ends[WARM + 1 :], strict=False))


def bare(folder: Path, steps: int) -> float:
    times = folder / "bare.txt"
    subprocess.run([sys.executable, str(folder / "script.py"), str(steps), str(times)], check=True)
    return step_median(times)


def harnessed(folder: Path, steps: int) -> float:
    times, run = folder / "harness.txt", folder / "run"
    run.mkdir(exist_ok=True)
    args = [str(steps + 1), str(times)]  # the harness stops it after `steps` steps
    launch_script(folder / "script.py", args, folder, run / "params.pt", steps, 1, 300,
                  measure=True, cwd=folder)  # fmt: skip
    return step_median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "script.py").write_text(SCRIPT)
        ratios = []
        for r in range(args.rounds):
            order = (bare, harnessed) if r % 2 == 0 else (harnessed, bare)
            got = {f.__name__: f(folder, args.steps) for f in order}
            ratios.append(got["harnessed"] / got["bare"])
            print(f"round {r}: bare {got['bare'] * 1e3:.2f} ms/step, harness "
                  f"{got['harnessed'] * 1e3:.2f} ms/step, ratio {ratios[-1]:.3f}")  # fmt: skip
    ci = median_interval(ratios)
    print(f"harness / bare step time: median {ci.median:.3f} (interval {ci.low:.3f}–{ci.high:.3f},"
          f" coverage {ci.coverage:.0%}, {ci.n} rounds); target ≤ 1.03")  # fmt: skip


if __name__ == "__main__":
    main()
