"""What `dpwise watch` costs a step of the user's job: its watcher (the optimizer and module
hooks that count steps and rows, and the thread that writes the rank's state every 0.5 s with
the Flight Recorder's collectives and the main thread's stack) against the same steps bare.

Paired, in one process: the guide's shape (SimpleModel 1000→512→10, batch 256, SGD) wrapped in
DDP in a one-process gloo group with the Flight Recorder on, trains in blocks of BLOCK steps,
alternately bare and watched. A block lasts longer than the watcher's interval, so each watched
block pays its writes. Each pair gives a ratio of median step times (the block's mean as well:
a write lands on a few steps, which the median would not see); the two blocks of a pair share
the machine's state, so its noise cancels. Target (issue 37): at most 1.03.

Run: .venv/bin/python bench/watch_overhead.py [--pairs 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "64")  # the recorder on, as watch sets it

import torch  # after the recorder's variable
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

from dpwise.measure.stats import median_interval
from dpwise.userscript.watcher import Watcher

BLOCK = 150  # steps per block: about a second, two of the watcher's writes
SETTLE = 2  # untimed steps at a block's start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pairs", type=int, default=40)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = dist.FileStore(str(Path(tmp) / "store"), 1)
        dist.init_process_group("gloo", store=store, rank=0, world_size=1)
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Linear(512, 10)))
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        loss_fn = nn.CrossEntropyLoss()
        x, y = torch.randn(4096, 1000), torch.randint(0, 10, (4096,))

        def block() -> list[float]:
            times = []
            for step in range(SETTLE + BLOCK):
                start = time.perf_counter()
                rows = torch.randint(0, 4096, (256,))
                loss = loss_fn(model(x[rows]), y[rows])
                opt.zero_grad()
                loss.backward()
                opt.step()
                if step >= SETTLE:
                    times.append(time.perf_counter() - start)
            return times

        def watched() -> list[float]:
            watcher = Watcher(tmp, 0).start()
            try:
                return block()
            finally:
                watcher.stop()

        medians, means = [], []
        for p in range(args.pairs):
            first, second = (block, watched) if p % 2 == 0 else (watched, block)
            a, b = first(), second()
            bare, hooked = (a, b) if first is block else (b, a)
            medians.append(statistics.median(hooked) / statistics.median(bare))
            means.append(statistics.fmean(hooked) / statistics.fmean(bare))
        written = Path(tmp, "rank0.json").stat().st_size
        dist.destroy_process_group()
    step = statistics.median(medians)
    for name, ratios in (("median step", medians), ("mean step (the writes included)", means)):
        ci = median_interval(ratios)
        print(f"watched / bare, {name}: {ci.median:.3f} (interval {ci.low:.3f}–{ci.high:.3f}, "
              f"coverage {ci.coverage:.0%}, {ci.n} pairs of {BLOCK} steps); "
              f"target ≤ 1.03")  # fmt: skip
    print(
        f"threads {torch.get_num_threads()}; a state is {written:,} bytes; median ratio {step:.3f}"
    )


if __name__ == "__main__":
    main()
