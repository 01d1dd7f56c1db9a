"""The guide's structure, with set_device inside setup()."""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank, world_size, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)


def train(rank, world_size, port):
    setup(rank, world_size, port)
    model = DDP(torch.nn.Linear(10, 10).cuda(rank), device_ids=[rank])
    loss = model(torch.randn(4, 10).cuda(rank)).sum()
    loss.backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    n = torch.cuda.device_count()
    mp.spawn(train, args=(n, free_port()), nprocs=n, join=True)
