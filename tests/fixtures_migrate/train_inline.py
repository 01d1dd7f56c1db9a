"""Single-process training, the DataLoader built in this file; saves the final weights."""

import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

# The data and the model come from one seed, so every process builds the same ones.
torch.manual_seed(0)


def main(out):
    model = nn.Sequential(nn.Linear(20, 16), nn.ReLU(), nn.Linear(16, 3))
    model = nn.DataParallel(model).cuda()  # wrap for all GPUs
    dataset = TensorDataset(torch.randn(256, 20), torch.randint(0, 3, (256,)))
    train_loader = DataLoader(
        dataset,
        batch_size=32,  # the global batch
        shuffle=True,
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for x, y in train_loader:
            x, y = x.cuda(), y.cuda()
            loss = nn.functional.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print("epoch", epoch, loss.item())
    torch.save(model.module.state_dict(), out)


if __name__ == "__main__":
    main(sys.argv[1])
