import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUM_STEPS = 4


def train(model, optimizer, batches):
    for i, (x, y) in enumerate(batches):
        last = (i + 1) % ACCUM_STEPS == 0
        loss = (model(x) - y).pow(2).mean() / ACCUM_STEPS
        with contextlib.nullcontext() if last else model.no_sync():  # expect: no-sync-without-forward
            loss.backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(16)]
    train(model, optimizer, batches)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
