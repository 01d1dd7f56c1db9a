"""Train with a `train(model, loader, optimizer, epoch)` function called by an epoch loop in main().

Style: the classic example layout: a Net class, a train() function for one epoch, a test() function,
a learning-rate scheduler stepped per epoch, everything started from `if __name__ == "__main__":`.
Single process (no DataParallel).

Run:     python train_function.py
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

EPOCHS = 3
BATCH_SIZE = 32
LR = 0.1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(20, 48)
        self.fc2 = nn.Linear(48, 3)

    def forward(self, x):
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


def train(model, loader, optimizer, epoch, device="cpu"):
    model.train()
    for batch_idx, (data, target) in enumerate(loader):
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % 5 == 0:
            print(f"Train Epoch: {epoch} [{batch_idx}/{len(loader)}]\tLoss: {loss.item():.6f}")


def test(model, loader, device="cpu"):
    model.eval()
    correct = 0
    with torch.no_grad():
        for data, target in loader:
            data, target = data.to(device), target.to(device)
            correct += (model(data).argmax(dim=1) == target).sum().item()
    print(f"Test set: Accuracy: {correct}/{len(loader.dataset)}")


def make_data(n, generator):
    x = torch.randn(n, 20, generator=generator)
    y = (x[:, :3].argmax(dim=1)).long()
    return TensorDataset(x, y)


def main():
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    train_set = make_data(320, gen)
    test_set = make_data(64, gen)
    train_loader = DataLoader(train_set, batch_size=BATCH_SIZE, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=64)

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = Net().to(device)
    optimizer = optim.SGD(model.parameters(), lr=LR)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)

    for epoch in range(1, EPOCHS + 1):
        train(model, train_loader, optimizer, epoch, device)
        test(model, test_loader, device)
        scheduler.step()

    torch.save(model.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))


if __name__ == "__main__":
    main()
