import os

import torch.distributed as dist
import torch.multiprocessing as mp


def setup(rank, world_size):
    os.environ.setdefault("MASTER_PORT", "29500")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def train(rank, world_size):
    setup(rank, world_size)
    for epoch in range(3):
        pass
    print("done")  # the last line of training


if __name__ == "__main__":
    mp.spawn(train, args=(2,), nprocs=2)
