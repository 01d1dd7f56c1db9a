"""torchrun --nproc_per_node=2 train.py"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main():
    dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(10000, 1000), torch.randint(0, 10, (10000,)))
    train_loader = DataLoader(dataset, batch_size=64, shuffle=True)  # expect: missing-distributed-sampler
    model = DDP(torch.nn.Linear(1000, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for epoch in range(5):
        for x, y in train_loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    if int(os.environ["RANK"]) == 0:
        print("done")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
