"""The sampler comes from a package whose __init__.py re-exports it from a submodule."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

from distributed import get_sampler


def main():
    dist.init_process_group("gloo")
    data = TensorDataset(torch.randn(64, 2))
    sampler = get_sampler(data)  # expect: missing-set-epoch
    loader = DataLoader(data, batch_size=8, sampler=sampler)
    model = DDP(torch.nn.Linear(2, 2))
    for epoch in range(3):
        for (x,) in loader:
            model(x).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
