"""A library module: it builds the sampler and hands the loader back; the caller owns set_epoch.

The endless re-iterating batch sampler below is not an epoch loop of this module's own.
"""
import torch
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class RepeatBatches:
    def __init__(self, batch_sampler):
        self.batch_sampler = batch_sampler

    def __iter__(self):
        while True:
            yield from iter(self.batch_sampler)


def make_train_loader(batch_size, rank=-1):
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    sampler = None if rank == -1 else DistributedSampler(dataset, shuffle=True)
    return DataLoader(dataset, batch_size=batch_size, sampler=sampler, shuffle=sampler is None)
