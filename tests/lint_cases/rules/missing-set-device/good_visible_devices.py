"""Each worker sees exactly one GPU, so cuda:0 is the right device and set_device is not needed."""
import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size, port):
    os.environ["CUDA_VISIBLE_DEVICES"] = str(rank)
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(10, 10).cuda(), device_ids=[0])
    model(torch.randn(4, 10).cuda()).sum().backward()
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


if __name__ == "__main__":
    mp.spawn(worker, args=(2, free_port()), nprocs=2)
