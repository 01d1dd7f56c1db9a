import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUM_STEPS = 4


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(64):
        x, y = torch.randn(4, 8), torch.randn(4, 1)
        last = (i + 1) % ACCUM_STEPS == 0
        with contextlib.nullcontext() if last else model.no_sync():
            loss = (model(x) - y).pow(2).mean() / ACCUM_STEPS
            loss.backward()
        if last:
            optimizer.step()
            optimizer.zero_grad()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
