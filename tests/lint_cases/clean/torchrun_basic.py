"""Data-parallel training, one process per GPU.

Launch: torchrun --standalone --nproc_per_node=4 torchrun_basic.py --epochs 10
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class SimpleModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(1000, 512)
        self.fc2 = nn.Linear(512, 10)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    return parser.parse_args()


def main():
    args = parse_args()
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="nccl")
    torch.cuda.set_device(local_rank)
    rank = dist.get_rank()

    dataset = TensorDataset(torch.randn(10000, 1000), torch.randint(0, 10, (10000,)))
    sampler = DistributedSampler(dataset, shuffle=True)
    loader = DataLoader(dataset, batch_size=args.batch_size, sampler=sampler, num_workers=2)

    model = DDP(SimpleModel().cuda(local_rank), device_ids=[local_rank])
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)

    try:
        for epoch in range(args.epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                x, y = x.cuda(local_rank, non_blocking=True), y.cuda(local_rank, non_blocking=True)
                loss = criterion(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
            if rank == 0:
                print(f"epoch {epoch}: loss {loss.item():.4f}")
                torch.save(model.module.state_dict(), "model.pt")
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
