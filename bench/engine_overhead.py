"""Engine overhead: dpwise's training loop against a minimal hand-written PyTorch loop.

Both loops train the default workload (the guide's SimpleModel, global batch 256) on the same rows
in the same order, with the same threads, alternating in the same processes; the medians of their
samples/s are compared. `single` runs in this process; `ddp` runs 2 gloo workers started by
torch.distributed's elastic launcher, each timing the hand-written DDP loop and dpwise's loop.

Run: .venv/bin/python bench/engine_overhead.py [--repeats 5] [--epochs 1]
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.launch.env import DistEnv
from dpwise.strategies.ddp import DDPStrategy
from dpwise.strategies.single import SingleStrategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import Loop
from dpwise.train.plan import resolve
from dpwise.workload.data import epoch_permutation
from dpwise.workload.models import SimpleModel, simple_data
from dpwise.workload.spec import resolve_workload

BATCH = 256


def hand_loop(x, y, epochs: int, rank: int = 0, world: int = 1) -> float:
    """The minimal loop a user would write: samples/s over `epochs` epochs."""
    torch.manual_seed(0)
    model = SimpleModel()
    if world > 1:
        model = DistributedDataParallel(model)
    loss_fn = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    steps = x.shape[0] // BATCH
    start = time.perf_counter()
    for epoch in range(epochs):
        perm = epoch_permutation(x.shape[0], 0, epoch)
        for step in range(steps):
            rows = perm[step * BATCH : (step + 1) * BATCH][rank::world]
            loss = loss_fn(model(x.index_select(0, rows)), y.index_select(0, rows))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    return epochs * steps * BATCH / (time.perf_counter() - start)


def dpwise_loop(strategy, epochs: int, world: int) -> float:
    ddp = world > 1
    cfg = TrainConfig(strategy="ddp" if ddp else "single", epochs=epochs, batch_size=BATCH)
    env = DistEnv(rank=strategy.rank, world_size=world, local_world_size=world, under_launcher=ddp)
    plan = resolve(cfg, Hardware(cuda_devices=0, cpu_cores=2), env)
    loop = Loop(plan, strategy, resolve_workload("simple", {}, None, {}))
    start = time.perf_counter()
    result = loop.run().result
    elapsed = time.perf_counter() - start
    return result.global_steps * BATCH / elapsed


def compare(repeats: int, epochs: int, rank: int, world: int, strategy) -> tuple[list, list]:
    """samples/s of each loop, one pair per repeat (adjacent in time, so load changes cancel)."""
    x, y = simple_data(seed=0)
    hand, ours = [], []
    for r in range(repeats + 1):  # the first pair warms up and is dropped
        order = [
            ("hand", lambda: hand_loop(x, y, epochs, rank, world)),
            ("dpwise", lambda: dpwise_loop(strategy, epochs, world)),
        ]
        for name, run in order if r % 2 == 0 else reversed(order):
            if world > 1:
                dist.barrier()
            rate = run()
            if r:
                (hand if name == "hand" else ours).append(rate)
    return hand, ours


def ddp_worker(repeats: int, epochs: int) -> tuple[list, list, int]:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    configure_threads(None, workers_per_node=world)  # as dpwise train sets up its workers
    strategy = DDPStrategy(DistEnv(rank=rank, world_size=world, under_launcher=True), "gloo", "cpu")
    strategy.setup()  # joins the existing group
    try:
        hand, ours = compare(repeats, epochs, rank, world, strategy)
    finally:
        dist.destroy_process_group()
    return hand, ours, torch.get_num_threads()


def run_ddp(repeats: int, epochs: int) -> tuple[list, list, int]:
    from torch.distributed.launcher.api import LaunchConfig, elastic_launch

    config = LaunchConfig(
        min_nodes=1,
        max_nodes=1,
        nproc_per_node=2,
        run_id=str(uuid.uuid4()),
        rdzv_backend="c10d",
        rdzv_endpoint="localhost:0",
        max_restarts=0,
    )
    return elastic_launch(config, ddp_worker)(repeats, epochs)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    header = f"{'strategy':<12}{'threads/proc':>13}{'hand samples/s':>17}{'dpwise samples/s':>18}"
    print(f"{header}{'ratio':>8}  (median of paired ratios, min–max; target ≥ 0.97)")
    hand, ours = compare(args.repeats, args.epochs, 0, 1, SingleStrategy(torch.device("cpu")))
    rows = [("single", torch.get_num_threads(), hand, ours)]
    hand, ours, threads = run_ddp(args.repeats, args.epochs)
    rows.append(("ddp × 2", threads, hand, ours))
    for name, threads, hand, ours in rows:
        ratios = [o / h for h, o in zip(hand, ours, strict=True)]
        print(
            f"{name:<12}{threads:>13}{statistics.median(hand):>17,.0f}"
            f"{statistics.median(ours):>18,.0f}{statistics.median(ratios):>8.2f}"
            f"  ({min(ratios):.2f}–{max(ratios):.2f})"
        )


if __name__ == "__main__":
    main()
