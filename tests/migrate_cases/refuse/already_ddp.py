# refuse: already-distributed
"""A script that is already distributed: it reads torchrun's variables, initialises a process
group and wraps the model in DistributedDataParallel.

Why it is refused: there is nothing to migrate; rewriting it again would add a second process
group and a second wrapper. `dpwise lint` is the tool for checking it.
"""

import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 20), torch.randint(0, 4, (512,)))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(data, batch_size=64 // world, sampler=sampler)
    model = DDP(nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for xb, yb in loader:
            optimizer.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            optimizer.step()
    if rank == 0:
        torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
