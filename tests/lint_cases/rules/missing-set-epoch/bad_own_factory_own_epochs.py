"""A module whose factory builds the sampler and whose own training function runs the epochs
without set_epoch: nothing is handed off to a caller, so it is reported here."""
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def make_loader(dataset):
    sampler = DistributedSampler(dataset)  # expect: missing-set-epoch
    return DataLoader(dataset, batch_size=32, sampler=sampler)


def train(model, epochs):
    loader = make_loader(TensorDataset(torch.randn(64, 8), torch.randn(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(epochs):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
