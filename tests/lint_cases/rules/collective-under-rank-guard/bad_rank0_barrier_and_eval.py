import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 1)
        self.register_buffer("scale", torch.ones(1))  # DDP broadcasts buffers in forward

    def forward(self, x):
        return self.linear(x) * self.scale


def validate(model, rank):
    if rank == 0:
        with torch.no_grad():
            out = model(torch.randn(4, 8))  # expect: collective-under-rank-guard
        print(f"validation output mean {out.mean().item():.3f}")
        dist.barrier()  # expect: collective-under-rank-guard


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(Scaled())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    validate(model, rank)
    if rank != 0:
        dist.destroy_process_group()
        return
    dist.all_reduce(torch.ones(1))  # expect: collective-under-rank-guard
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
