import os

import torch.distributed as dist

PORT = 29501


def setup_env(rank, world_size):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = "12355"  # expect: hardcoded-master-port


def setup_int(rank, world_size):
    os.environ["MASTER_PORT"] = str(PORT)  # expect: hardcoded-master-port


def setup_update(rank, world_size):
    os.environ.update(MASTER_ADDR="localhost", MASTER_PORT="29502")  # expect: hardcoded-master-port


def setup_tcp(rank, world_size):
    dist.init_process_group(
        "gloo",
        init_method="tcp://127.0.0.1:23456",  # expect: hardcoded-master-port
        rank=rank,
        world_size=world_size,
    )
    dist.destroy_process_group()
