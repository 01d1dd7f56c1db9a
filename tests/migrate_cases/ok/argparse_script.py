"""Train a small classifier with nn.DataParallel; settings come from argparse flags.

Style: a flat script whose hyper-parameters are command-line flags (--epochs, --batch-size, --lr,
--seed), the model wrapped in nn.DataParallel when CUDA devices exist, a per-batch log line.

Run:     python argparse_script.py [--epochs 2 --batch-size 64 --lr 0.05]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Net(nn.Module):
    def __init__(self, in_features=32, hidden=64, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


parser = argparse.ArgumentParser(description="small DataParallel example")
parser.add_argument("--epochs", type=int, default=2, help="number of epochs (default: 2)")
parser.add_argument("--batch-size", type=int, default=64, help="input batch size (default: 64)")
parser.add_argument("--lr", type=float, default=0.05, help="learning rate (default: 0.05)")
parser.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")
parser.add_argument("--log-interval", type=int, default=4, help="batches between log lines")
args = parser.parse_args()

torch.manual_seed(args.seed)
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

inputs = torch.randn(512, 32)
labels = torch.randint(0, 4, (512,))
train_loader = DataLoader(TensorDataset(inputs, labels), batch_size=args.batch_size, shuffle=True)

model = Net().to(device)
if torch.cuda.device_count() > 1:
    print(f"Using {torch.cuda.device_count()} GPUs")
model = nn.DataParallel(model)
optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
criterion = nn.CrossEntropyLoss()

for epoch in range(1, args.epochs + 1):
    model.train()
    for batch_idx, (data, target) in enumerate(train_loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        loss = criterion(model(data), target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0:
            print(
                f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]"
                f"\tLoss: {loss.item():.6f}"
            )

torch.save(model.module.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
