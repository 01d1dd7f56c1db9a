"""The process group is set up in the parent, but mp.spawn starts fresh processes."""
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size):
    model = DDP(torch.nn.Linear(10, 10))  # expect: ddp-before-init-process-group
    model(torch.randn(4, 10)).sum().backward()


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    mp.spawn(worker, args=(2,), nprocs=2)


if __name__ == "__main__":
    main()
