"""A sampler class whose `__iter__` loops forever over its own index passes: how it yields
indices, not a training loop's epochs. The script makes one pass over its loader (no epochs), so
`set_epoch` is not needed."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, Sampler, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class InfiniteSampler(Sampler):
    def __init__(self, size):
        self.size = size

    def __iter__(self):
        while True:
            for index in torch.randperm(self.size).tolist():
                yield index


class RepeatingBatchSampler:
    def __init__(self, sampler):
        self.sampler = sampler

    def batches(self):
        while True:
            for index in self.sampler:
                yield [index]


def main():
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 2))
    sampler = DistributedSampler(data, shuffle=True)
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DDP(torch.nn.Linear(2, 2))
    for (x,) in loader:
        model(x).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
