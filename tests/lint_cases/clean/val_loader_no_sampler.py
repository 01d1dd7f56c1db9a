"""Train with a DistributedSampler; validate on rank 0 with a plain loader."""
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


@torch.no_grad()
def validate(model, loader, device):
    model.eval()
    correct = total = 0
    for x, y in loader:
        pred = model(x.to(device)).argmax(dim=1)
        correct += (pred == y.to(device)).sum().item()
        total += y.numel()
    model.train()
    return correct / total


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    device = torch.device("cuda", local_rank)

    train_set = TensorDataset(torch.randn(5000, 20), torch.randint(0, 3, (5000,)))
    val_set = TensorDataset(torch.randn(500, 20), torch.randint(0, 3, (500,)))
    train_sampler = DistributedSampler(train_set)
    train_loader = DataLoader(train_set, batch_size=50, sampler=train_sampler)
    val_loader = DataLoader(val_set, batch_size=100, shuffle=False)

    model = DDP(nn.Linear(20, 3).to(device), device_ids=[local_rank])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(5):
        train_sampler.set_epoch(epoch)
        for x, y in train_loader:
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if dist.get_rank() == 0:
            acc = validate(model.module, val_loader, device)
            print(f"epoch {epoch}: val accuracy {acc:.3f}")
        dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
