"""CIFAR-style script: module-level loaders, `train(epoch)` and `test(epoch)` reading them as
globals, a best-accuracy checkpoint dict, and a wrap only `if device == "cuda"`.

Style: the layout of many small image-classification repositories: argparse with --lr and
--resume, `net = net.to(device)` then `if device == "cuda": net = torch.nn.DataParallel(net)`,
an epoch loop from `start_epoch` that calls train(epoch) and test(epoch), and a checkpoint
`{"net": net.state_dict(), "acc": acc, "epoch": epoch}` saved when the accuracy improves.

Run:     python global_loader_functions.py [--lr 0.05] [--epochs 2]
Output:  the final weights (unwrapped state_dict) go to $DPWISE_OUT (default: final.pt).
"""

import argparse
import os

import torch
import torch.nn as nn
import torch.optim as optim
from torch.utils.data import DataLoader, TensorDataset

parser = argparse.ArgumentParser(description="toy classifier")
parser.add_argument("--lr", default=0.05, type=float, help="learning rate")
parser.add_argument("--epochs", default=2, type=int)
parser.add_argument("--resume", "-r", action="store_true", help="resume from checkpoint")
args = parser.parse_args()

device = "cuda" if torch.cuda.is_available() else "cpu"
best_acc = 0.0
start_epoch = 0

torch.manual_seed(11)
images = torch.randn(384, 3, 8, 8)
classes = images.mean(dim=(1, 2, 3)).gt(0).long()
trainset = TensorDataset(images[:320], classes[:320])
trainloader = DataLoader(trainset, batch_size=32, shuffle=True)
testset = TensorDataset(images[320:], classes[320:])
testloader = DataLoader(testset, batch_size=64, shuffle=False)

net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(512, 2))
net = net.to(device)
if device == "cuda":
    net = torch.nn.DataParallel(net)

if args.resume:
    checkpoint = torch.load("ckpt.pth")
    net.load_state_dict(checkpoint["net"])
    best_acc = checkpoint["acc"]
    start_epoch = checkpoint["epoch"]

criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4)


def train(epoch):
    print(f"\nEpoch: {epoch}")
    net.train()
    train_loss = 0.0
    for batch_idx, (inputs, targets) in enumerate(trainloader):
        inputs, targets = inputs.to(device), targets.to(device)
        optimizer.zero_grad()
        loss = criterion(net(inputs), targets)
        loss.backward()
        optimizer.step()
        train_loss += loss.item()
    print(f"train loss {train_loss / (batch_idx + 1):.3f}")


def test(epoch):
    global best_acc
    net.eval()
    correct = 0
    with torch.no_grad():
        for inputs, targets in testloader:
            inputs, targets = inputs.to(device), targets.to(device)
            correct += net(inputs).argmax(1).eq(targets).sum().item()
    acc = 100.0 * correct / len(testset)
    if acc > best_acc:
        state = {"net": net.state_dict(), "acc": acc, "epoch": epoch}
        torch.save(state, "ckpt.pth")
        best_acc = acc


for epoch in range(start_epoch, start_epoch + args.epochs):
    train(epoch)
    test(epoch)

model = net.module if hasattr(net, "module") else net
torch.save(model.state_dict(), os.environ.get("DPWISE_OUT", "final.pt"))
