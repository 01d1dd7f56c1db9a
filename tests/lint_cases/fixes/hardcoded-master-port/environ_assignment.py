import os

import torch.distributed as dist


def setup(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"  # the tutorial's port
    os.environ['MASTER_PORT'] = 29500
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
