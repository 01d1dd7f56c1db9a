"""One process, no process group: a step, then a long evaluation of its own (no other rank
waits for it, so it is no hang)."""

import time

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(8, 4)).sum().backward()
opt.step()
time.sleep(2.5)
