"""sched_single.py's training spread over the GPUs by mp.spawn: DDP on NCCL, a DistributedSampler,
each rank BATCH / world rows, the same AdamW, schedule and clipping (the clip sees the averaged
gradients, the same on every rank)."""

import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from sched_single import BATCH, EPOCHS, make_data, make_model, make_optimizer


def train(rank, world_size):
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    data = make_data()
    sampler = DistributedSampler(data, num_replicas=world_size, rank=rank, shuffle=True)
    loader = DataLoader(data, batch_size=BATCH // world_size, sampler=sampler)
    model = DDP(make_model().to(rank), device_ids=[rank])
    opt, scheduler = make_optimizer(model.module, EPOCHS * len(loader))
    for epoch in range(EPOCHS):
        sampler.set_epoch(epoch)
        for x, y in loader:
            x, y = x.to(rank), y.to(rank)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
            opt.step()
            scheduler.step()
        if rank == 0:
            print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.2e} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(train, args=(world_size,), nprocs=world_size, join=True)
