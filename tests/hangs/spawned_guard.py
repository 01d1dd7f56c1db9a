"""A script that starts its own processes (mp.spawn, the guide's ddp_train.py style) with a
barrier that only rank 0 calls after its loop."""

import os

import torch.distributed as dist
import torch.multiprocessing as mp
from common import train


def worker(rank, world_size):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ.setdefault("MASTER_PORT", "29533")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    train()
    if rank == 0:
        dist.barrier()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2, join=True)
