"""Train on every GPU of this machine.

Launch with:  torchrun --nproc_per_node=2 bad_says_torchrun.py
"""
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def train(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(10, 10))
    model(torch.randn(4, 10)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.multiprocessing.spawn(train, args=(2,), nprocs=2)  # expect: spawn-under-torchrun
