"""One process: an MLP on rows read from a file the script is given (argparse), shuffled."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

rows = torch.load(args.data)
data = TensorDataset(rows["x"], rows["y"])
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    for x, y in DataLoader(data, batch_size=args.batch_size, shuffle=True):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    print(f"epoch {epoch} done")
