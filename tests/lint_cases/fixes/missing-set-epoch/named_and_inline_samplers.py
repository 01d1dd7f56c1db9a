import torch
from torch.utils.data import DataLoader, DistributedSampler


def train(data, extra, epochs):
    sampler = DistributedSampler(data)  # shuffles by default
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    extra_loader = DataLoader(extra, batch_size=8, sampler=DistributedSampler(extra))
    for epoch in range(epochs):
        # one pass over both
        for batch in loader:
            pass
        for batch in extra_loader:
            pass
