"""Rank 0 alone evaluates a DDP model that has no buffers: DDP broadcasts nothing in its forward,
so the other ranks are not waited for (a common pattern in small GPT training scripts)."""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


@torch.no_grad()
def estimate_loss(model):
    model.eval()
    loss = model(torch.randn(4, 8)).pow(2).mean()
    model.train()
    return loss.item()


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(10):
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % 5 == 0 and rank == 0:
            print(f"step {step}: eval loss {estimate_loss(model):.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
