import argparse

import torch.distributed as dist

HOST = "10.0.0.1"


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--dist-url", default="tcp://127.0.0.1:23456", type=str)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--rank", type=int, default=0)
    return p.parse_args()


def connect_url(args):
    dist.init_process_group("gloo", init_method=args.dist_url, rank=args.rank, world_size=2)  # expect: hardcoded-master-port


def connect_port(args):
    url = f"tcp://{HOST}:{args.port}"
    dist.init_process_group("gloo", init_method=url, rank=args.rank, world_size=2)  # expect: hardcoded-master-port


def connect_variable(rank):
    port = 29533
    address = "tcp://localhost:" + str(port)
    dist.init_process_group("gloo", init_method=address, rank=rank, world_size=2)  # expect: hardcoded-master-port
    dist.destroy_process_group()
