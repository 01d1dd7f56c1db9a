"""Rank 0 alone evaluates the DDP model defined in a sibling module without buffers: DDP has
nothing to broadcast in the forward, so the other ranks are not waited for."""
import os

import helper_plain_net
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    rank = int(os.environ["RANK"])
    model = DDP(helper_plain_net.small_net())
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        model.train()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
        optimizer.zero_grad()
        model.eval()
        if rank == 0:
            with torch.no_grad():
                out = model(torch.randn(4, 8))
            print(f"epoch {epoch}: eval mean {out.mean().item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
