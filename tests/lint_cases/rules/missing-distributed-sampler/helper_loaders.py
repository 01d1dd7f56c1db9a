"""A sibling module with a loader factory, imported by bad_imported_helper.py."""
import torch
from torch.utils.data import DataLoader, TensorDataset


def build_train_loader(batch_size):
    dataset = TensorDataset(torch.randn(1000, 8), torch.randint(0, 2, (1000,)))
    return DataLoader(dataset, batch_size=batch_size, shuffle=True)


def build_loader_for_rank(batch_size, rank, world_size):
    dataset = TensorDataset(torch.randn(1000, 8), torch.randint(0, 2, (1000,)))
    indices = list(range(rank, len(dataset), world_size))
    return DataLoader(torch.utils.data.Subset(dataset, indices), batch_size=batch_size)
