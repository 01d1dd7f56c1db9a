# refuse: iterable-dataset
"""Streaming data: an IterableDataset yields samples from a generator (as a file reader would).

Why it is refused: a DistributedSampler cannot be attached to an IterableDataset; each rank would
read the whole stream. Splitting the stream by rank (and by DataLoader worker) is the dataset's own
job, which only its author can do safely.
"""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset


class SyntheticStream(IterableDataset):
    def __init__(self, n=512, seed=0):
        self.n, self.seed = n, seed

    def __iter__(self):
        g = torch.Generator().manual_seed(self.seed)
        for _ in range(self.n):
            x = torch.randn(12, generator=g)
            yield x, (x.sum() > 0).long()


model = nn.DataParallel(nn.Sequential(nn.Linear(12, 24), nn.ReLU(), nn.Linear(24, 2)))
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
loader = DataLoader(SyntheticStream(), batch_size=64)
for _epoch in range(2):
    for xb, yb in loader:
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        optimizer.step()
torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
