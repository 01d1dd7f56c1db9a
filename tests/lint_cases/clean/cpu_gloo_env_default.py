"""CPU-only DDP for a laptop: gloo, two processes, MASTER_PORT overridable from the environment."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

WORLD_SIZE = 2


def run(rank: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(10, 1))
    dataset = TensorDataset(torch.randn(800, 10), torch.randn(800, 1))
    sampler = DistributedSampler(dataset, num_replicas=WORLD_SIZE, rank=rank, drop_last=True)
    loader = DataLoader(dataset, batch_size=20, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    for epoch in range(2):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if rank == 0:
        torch.save(model.module.state_dict(), "cpu_ddp.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(run, nprocs=WORLD_SIZE, join=True)
