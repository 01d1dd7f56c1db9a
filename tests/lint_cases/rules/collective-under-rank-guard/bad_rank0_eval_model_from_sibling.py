"""Rank 0 alone evaluates the DDP model whose BatchNorm (defined in a sibling module) holds
buffers: DDP broadcasts them at the start of the forward and waits for the other ranks."""
import os

import helper_bn_net
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(helper_bn_net.small_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        model.eval()
        if rank == 0:
            with torch.no_grad():
                out = model(torch.randn(4, 8))  # expect: collective-under-rank-guard
            print(f"epoch {epoch}: eval mean {out.mean().item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
