"""Single-process multi-GPU training with nn.DataParallel."""
import torch
import torch.nn as nn

model = nn.Sequential(nn.Linear(1000, 512), nn.ReLU(), nn.Linear(512, 10))
if torch.cuda.device_count() > 1:
    model = nn.DataParallel(model)  # expect: data-parallel-usage
model = model.to("cuda")
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(100):
    x = torch.randn(256, 1000, device="cuda")
    loss = model(x).square().mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
