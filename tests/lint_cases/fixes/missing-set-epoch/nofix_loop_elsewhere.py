import torch
from torch.utils.data import DataLoader, DistributedSampler


def make_loader(data):
    return DataLoader(data, batch_size=8, sampler=DistributedSampler(data))


def train(data, epochs):
    # The sampler is not named where the epochs run: the fix would have to guess.
    loader = make_loader(data)
    for epoch in range(epochs):
        for batch in loader:
            pass
