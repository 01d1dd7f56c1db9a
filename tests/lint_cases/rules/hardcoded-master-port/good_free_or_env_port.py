import os
import socket

import torch.distributed as dist


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup(rank, world_size, port=None):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29500")
    os.environ["MASTER_PORT"] = os.environ.get("MASTER_PORT", str(port or free_port()))
    if "MASTER_PORT" not in os.environ:
        os.environ["MASTER_PORT"] = "29500"
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def setup_tcp(rank, world_size, host, port):
    dist.init_process_group("gloo", init_method=f"tcp://{host}:{port}", rank=rank, world_size=world_size)


def cleanup():
    dist.destroy_process_group()
