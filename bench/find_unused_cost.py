"""What find_unused_parameters=True (and static_graph=True) costs DDP per training step.

One process, a one-member gloo group (what compare's ddp × 1 run is), the built-in transformer
(every parameter used, so DDP works with and without the option). Steps of each setting alternate
so a change in machine load hits both; each figure is the median step time over the rounds.

Run: .venv/bin/python bench/find_unused_cost.py
"""

from __future__ import annotations

import statistics
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from dpwise.workload.models import TinyTransformer, token_data

ROUNDS, STEPS, BATCH, THREADS = 9, 3, 64, 1  # one thread: stable on a shared machine
SETTINGS = {
    "plain": {},
    "find_unused_parameters": {"find_unused_parameters": True},
    "static_graph": {"static_graph": True},
}


def _wrapped(options: dict[str, bool]) -> tuple[DistributedDataParallel, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = DistributedDataParallel(TinyTransformer(), **options)
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def _steps(model, optimizer, x, y) -> float:
    start = time.perf_counter()
    for _ in range(STEPS):
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return (time.perf_counter() - start) / STEPS


def main() -> None:
    torch.set_num_threads(THREADS)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    x, y = token_data(0, samples=BATCH)
    runs = {name: _wrapped(options) for name, options in SETTINGS.items()}
    for model, optimizer in runs.values():
        _steps(model, optimizer, x, y)  # warm-up (static_graph records its graph here)
    times: dict[str, list[float]] = {name: [] for name in SETTINGS}
    for _ in range(ROUNDS):
        for name, (model, optimizer) in runs.items():
            times[name].append(_steps(model, optimizer, x, y))
    dist.destroy_process_group()
    base = statistics.median(times["plain"])
    print(f"TinyTransformer() (2 layers, dim 64), batch {BATCH}, {THREADS} thread(s)")
    for name, values in times.items():
        med = statistics.median(values)
        print(f"{name:24s} {med * 1e3:8.1f} ms/step  {med / base:5.2f}× plain DDP")


if __name__ == "__main__":
    main()
