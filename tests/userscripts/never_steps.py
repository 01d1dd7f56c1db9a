"""Trains forward and backward but never calls optimizer.step (a forgotten line)."""

import torch

model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.ones(2, 4)).sum().backward()
print("done, without a step")
