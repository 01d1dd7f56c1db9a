"""A DataParallel script whose model is chosen on the command line, for `migrate --verify`:
`batchnorm` (BatchNorm1d), `dropout` (nn.Dropout), `plain`; `crash` raises at the second
step, `nostep` never steps its optimizer."""

import sys

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)


def build(kind):
    middle = {"batchnorm": nn.BatchNorm1d(16), "dropout": nn.Dropout(0.5)}.get(kind, nn.ReLU())
    return nn.Sequential(nn.Linear(12, 16), middle, nn.ReLU(), nn.Linear(16, 3))


def main(kind):
    model = nn.DataParallel(build(kind)).cuda()
    dataset = TensorDataset(torch.randn(128, 12), torch.randint(0, 3, (128,)))
    loader = DataLoader(dataset, batch_size=32, shuffle=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        for step, (x, y) in enumerate(loader):
            if kind == "crash" and step == 1:
                raise RuntimeError("the data file is corrupt")
            loss = nn.functional.cross_entropy(model(x.cuda()), y.cuda())
            optimizer.zero_grad()
            loss.backward()
            if kind != "nostep":
                optimizer.step()


if __name__ == "__main__":
    main(sys.argv[1])
