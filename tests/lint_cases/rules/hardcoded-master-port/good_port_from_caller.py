import argparse
import os

import torch.distributed as dist


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--dist-url", default="env://", type=str)
    p.add_argument("--port", type=int, required=True)
    return p.parse_args()


def connect_url(args, rank):
    dist.init_process_group("gloo", init_method=args.dist_url, rank=rank, world_size=2)


def connect_port(args, rank):
    url = f"tcp://localhost:{args.port}"
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=2)


def connect_env(rank):
    port = os.environ.get("PORT", "0")
    dist.init_process_group("gloo", init_method=f"tcp://localhost:{port}", rank=rank, world_size=2)
    dist.destroy_process_group()
