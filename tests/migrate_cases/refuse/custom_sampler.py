# refuse: custom-sampler
"""Class-imbalanced training: a WeightedRandomSampler draws rare classes more often.

Why it is refused: the DataLoader gets its own sampler, so the migration cannot simply swap in a
DistributedSampler; the weighted draw has to be sharded across ranks by a person (for example a
distributed weighted sampler), or every rank trains on the same draw.
"""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

torch.manual_seed(0)
x = torch.randn(400, 16)
y = torch.cat([torch.zeros(360, dtype=torch.long), torch.ones(40, dtype=torch.long)])
class_count = torch.bincount(y).float()
sample_weights = (1.0 / class_count)[y]
sampler = WeightedRandomSampler(sample_weights, num_samples=len(y), replacement=True)
loader = DataLoader(TensorDataset(x, y), batch_size=32, sampler=sampler)

model = nn.DataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 2)))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _epoch in range(2):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()

torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
