# refuse: own-spawning
"""Hogwild workers started one by one with torch.multiprocessing.Process over a shared model.

Why it is refused: like `mp.spawn`, the script manages its own processes (start/join loop);
torchrun would start this whole launcher once per rank, and the asynchronous shared-memory
updates are not what DDP computes.
"""

import os

import torch
import torch.multiprocessing as mp
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def worker(rank, model, data):
    torch.manual_seed(rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.5)
    for xb, yb in DataLoader(data, batch_size=32, shuffle=True):
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(1)
    mp.set_start_method("spawn", force=True)
    data = TensorDataset(torch.randn(256, 10), torch.randint(0, 2, (256,)))
    model = nn.Linear(10, 2)
    model.share_memory()
    workers = []
    for rank in range(2):
        p = mp.Process(target=worker, args=(rank, model, data))
        p.start()
        workers.append(p)
    for p in workers:
        p.join()
    torch.save(model.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
