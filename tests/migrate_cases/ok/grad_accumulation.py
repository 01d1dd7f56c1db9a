"""Gradient accumulation: N micro-batches are accumulated before each optimizer step.

Style: the loss is divided by the accumulation count, backward() runs every micro-batch, and
optimizer.step() / zero_grad() run every `accum_steps` micro-batches. The effective batch is
micro_batch * accum_steps. The model is wrapped in nn.DataParallel.

Run:     python grad_accumulation.py [--accum-steps 4 --micro-batch 16]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import argparse
import os

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--micro-batch", type=int, default=16)
parser.add_argument("--accum-steps", type=int, default=4)
parser.add_argument("--lr", type=float, default=0.05)
args = parser.parse_args()

torch.manual_seed(5)
device = "cuda" if torch.cuda.is_available() else "cpu"

data = torch.randn(512, 30)
target = torch.randint(0, 3, (512,))
train_dl = DataLoader(TensorDataset(data, target), batch_size=args.micro_batch, shuffle=True)

model = nn.Sequential(nn.Linear(30, 64), nn.ReLU(), nn.Linear(64, 3))
model = nn.DataParallel(model).to(device)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
criterion = nn.CrossEntropyLoss()

optimizer.zero_grad()
for epoch in range(args.epochs):
    model.train()
    for i, (xb, yb) in enumerate(train_dl):
        xb, yb = xb.to(device), yb.to(device)
        loss = criterion(model(xb), yb) / args.accum_steps
        loss.backward()
        if (i + 1) % args.accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad()
            print(f"epoch {epoch} update {(i + 1) // args.accum_steps} loss {loss.item():.4f}")

torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
