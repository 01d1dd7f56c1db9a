"""The port parameter has a default, but the caller always passes a free port."""
import os
import socket

import torch.distributed as dist


def free_port():
    with socket.socket() as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def init_distributed(port=40112, rank=0, world_size=1):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def main():
    init_distributed(free_port(), rank=0, world_size=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
