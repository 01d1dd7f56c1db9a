# refuse: model-parallel
"""Naive model parallelism: the first half of the network lives on cuda:0, the second on cuda:1.

Why it is refused: the model is split across devices by hand (`.to("cuda:1")` inside forward);
DDP with one process per device would give each process a model that reaches for a device that is
not its own. Combining this with data parallelism (one model-parallel pair per process, DDP
without device_ids) is a design decision for a person.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class TwoDeviceNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.part1 = nn.Sequential(nn.Linear(64, 256), nn.ReLU()).to("cuda:0")
        self.part2 = nn.Linear(256, 10).to("cuda:1")

    def forward(self, x):
        h = self.part1(x.to("cuda:0"))
        return self.part2(h.to("cuda:1"))


torch.manual_seed(0)
model = TwoDeviceNet()
loader = DataLoader(
    TensorDataset(torch.randn(512, 64), torch.randint(0, 10, (512,))), batch_size=64, shuffle=True
)
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for x, y in loader:
    optimizer.zero_grad()
    out = model(x)
    loss = nn.functional.cross_entropy(out, y.to("cuda:1"))
    loss.backward()
    optimizer.step()
torch.save(model.state_dict(), "final.pt")
