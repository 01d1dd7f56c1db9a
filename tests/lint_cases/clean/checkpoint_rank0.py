"""Checkpoint and resume under DDP: rank 0 writes, every rank reads."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

CKPT = "checkpoint.pt"


def save_checkpoint(model, optimizer, epoch, path=CKPT):
    state = {
        "model": model.module.state_dict(),
        "optimizer": optimizer.state_dict(),
        "epoch": epoch,
    }
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_checkpoint(model, optimizer, local_rank):
    if not os.path.exists(CKPT):
        return 0
    state = torch.load(CKPT, map_location=f"cuda:{local_rank}", weights_only=True)
    model.module.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    return state["epoch"] + 1


def main():
    dist.init_process_group("nccl")
    rank, local_rank = dist.get_rank(), int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = DDP(nn.Linear(64, 4).cuda(local_rank), device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    start = load_checkpoint(model, optimizer, local_rank)
    dataset = TensorDataset(torch.randn(2048, 64), torch.randint(0, 4, (2048,)))
    sampler = DistributedSampler(dataset, seed=0)
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    for epoch in range(start, 20):
        sampler.set_epoch(epoch)
        for x, y in loader:
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if rank == 0:
            save_checkpoint(model, optimizer, epoch)
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
