"""mlp_single.py's model wrapped in nn.DataParallel on every visible GPU, the whole batch given
to the wrapper (it splits it over the devices), as a script written for one machine does."""

import argparse

import torch
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--batch-size", type=int, default=32)
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
rows = torch.load(args.data)
data = TensorDataset(rows["x"], rows["y"])
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
model = torch.nn.DataParallel(model).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
for epoch in range(3):
    for x, y in DataLoader(data, batch_size=args.batch_size, shuffle=True):
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
