"""Gradient accumulation done right: all-reduce only on the last micro-step."""
import contextlib
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

ACCUMULATION_STEPS = 4


def train_epoch(model, loader, optimizer, device):
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(loader):
        boundary = (i + 1) % ACCUMULATION_STEPS == 0 or i + 1 == len(loader)
        context = contextlib.nullcontext() if boundary else model.no_sync()
        with context:
            loss = F.cross_entropy(model(x.to(device)), y.to(device)) / ACCUMULATION_STEPS
            loss.backward()
        if boundary:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    return loss.item() * ACCUMULATION_STEPS


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    model = DDP(torch.nn.Linear(128, 10).to(device), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    dataset = TensorDataset(torch.randn(4096, 128), torch.randint(0, 10, (4096,)))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler, drop_last=True)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        loss = train_epoch(model, loader, optimizer, device)
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: loss {loss:.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
