# refuse: custom-sampler
"""Length-bucketed batches: a hand-written batch Sampler groups samples of similar length.

Why it is refused: `batch_sampler=` decides the batches itself; sharding those batches across
ranks (and keeping the global batch) needs a person's decision.
"""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset, Sampler


class VarLenData(Dataset):
    def __init__(self, n=256):
        g = torch.Generator().manual_seed(1)
        self.lengths = torch.randint(2, 9, (n,), generator=g)
        self.x = torch.randn(n, 8, generator=g)
        self.y = torch.randint(0, 2, (n,), generator=g)

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class BucketBatchSampler(Sampler):
    def __init__(self, lengths, batch_size):
        self.order = torch.argsort(lengths).tolist()
        self.batch_size = batch_size

    def __iter__(self):
        for start in range(0, len(self.order), self.batch_size):
            yield self.order[start : start + self.batch_size]

    def __len__(self):
        return (len(self.order) + self.batch_size - 1) // self.batch_size


data = VarLenData()
loader = DataLoader(data, batch_sampler=BucketBatchSampler(data.lengths, 32))
model = nn.DataParallel(nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for xb, yb in loader:
    optimizer.zero_grad()
    nn.functional.cross_entropy(model(xb), yb).backward()
    optimizer.step()
torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
