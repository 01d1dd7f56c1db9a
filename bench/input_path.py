"""Input path: dpwise's default data path against the guide's DataLoader loop, side by side.

The guide's loop is `DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True)`; dpwise indexes
the same tensors with one seeded permutation per epoch (`BatchSource.get`). Both produce every batch
of an epoch of the default workload; runs alternate in one process and the medians are compared.
A second table times the whole training step on top of each input path (informational).

Run: .venv/bin/python bench/input_path.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dpwise.workload.data import BatchSource, epoch_permutation, micro_batch_rows
from dpwise.workload.models import SimpleModel, simple_data

BATCH = 256


def guide_batches(x, y, epoch):
    torch.manual_seed(epoch)
    yield from DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True)


def dpwise_batches(source, epoch):
    perm = epoch_permutation(len(source), 0, epoch)
    for step in range(len(source) // BATCH):
        yield source.get(micro_batch_rows(perm, step, 0, BATCH, 1))


def time_epoch(batches, train_step=None) -> float:
    """Samples per second over one epoch of batches (optionally with a training step each)."""
    start, samples = time.perf_counter(), 0
    for xb, yb in batches:
        if train_step is not None:
            train_step(xb, yb)
        samples += xb.shape[0]
    return samples / (time.perf_counter() - start)


def make_train_step():
    torch.manual_seed(0)
    model, loss_fn = SimpleModel(), nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(xb, yb):
        loss = loss_fn(model(xb), yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def measure(repeats: int, with_training: bool) -> tuple[float, float]:
    x, y = simple_data(seed=0)
    source = BatchSource((x, y), "bench")
    step = make_train_step() if with_training else None
    guide, ours = [], []
    for r in range(repeats + 1):  # the first pair warms up and is dropped
        pair = [
            ("guide", lambda e=r: time_epoch(guide_batches(x, y, e), step)),
            ("dpwise", lambda e=r: time_epoch(dpwise_batches(source, e), step)),
        ]
        for name, run in pair if r % 2 == 0 else reversed(pair):
            rate = run()
            if r:
                (guide if name == "guide" else ours).append(rate)
    return statistics.median(guide), statistics.median(ours)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"threads: {torch.get_num_threads()}, batch {BATCH}, 10,000 × 1000 float32 samples")
    print(f"{'what':<32}{'guide samples/s':>18}{'dpwise samples/s':>18}{'ratio':>8}")
    for label, training in (
        ("input path only (target ≥ 1.3)", False),
        ("input + training step", True),
    ):
        guide, ours = measure(args.repeats, training)
        print(f"{label:<32}{guide:>18,.0f}{ours:>18,.0f}{ours / guide:>8.2f}")


if __name__ == "__main__":
    main()
