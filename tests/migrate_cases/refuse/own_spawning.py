# refuse: own-spawning
"""Hogwild-style training: the script starts its own worker processes with torch.multiprocessing.

Why it is refused: the script already manages its processes (mp.spawn over a shared-memory
model). Under torchrun every worker would spawn again (a double launch); turning these workers
into torchrun ranks changes the algorithm (asynchronous updates become synchronous all-reduce).
"""

import os

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def train(rank, model, num_processes):
    torch.manual_seed(100 + rank)
    data = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    loader = DataLoader(data, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for xb, yb in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()


if __name__ == "__main__":
    num_processes = 2
    model = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, 2))
    model.share_memory()
    mp.spawn(train, args=(model, num_processes), nprocs=num_processes, join=True)
    torch.save(model.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
