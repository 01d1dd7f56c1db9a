"""Accumulation without DDP: there is nothing to synchronise."""
import torch

model = torch.nn.Linear(8, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for i in range(64):
    loss = model(torch.randn(4, 8)).pow(2).mean() / 4
    loss.backward()
    if (i + 1) % 4 == 0:
        optimizer.step()
        optimizer.zero_grad()
