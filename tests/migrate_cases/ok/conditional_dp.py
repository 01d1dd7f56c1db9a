"""Wrap in nn.DataParallel only when several GPUs exist; save through `hasattr(model, "module")`.

Style: `if torch.cuda.device_count() > 1: model = nn.DataParallel(model)`, a map-style Dataset
class with __len__/__getitem__, and the save that strips the wrapper only if there is one.

Run:     python conditional_dp.py
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class PointsDataset(Dataset):
    def __init__(self, n=320):
        g = torch.Generator().manual_seed(9)
        self.points = torch.randn(n, 8, generator=g)
        self.labels = (self.points[:, 0] * self.points[:, 1] > 0).long()

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        return {"x": self.points[i], "label": self.labels[i]}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(8, 40)
        self.out = nn.Linear(40, 2)

    def forward(self, x):
        return self.out(F.relu(self.hidden(x)))


torch.manual_seed(9)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
model = Classifier()
if torch.cuda.device_count() > 1:
    model = nn.DataParallel(model)
model.to(device)

loader = DataLoader(PointsDataset(), batch_size=40, shuffle=True)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

for epoch in range(3):
    for batch in loader:
        logits = model(batch["x"].to(device))
        loss = F.cross_entropy(logits, batch["label"].to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")

to_save = model.module if hasattr(model, "module") else model
torch.save(to_save.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
