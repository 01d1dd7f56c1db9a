"""Ports in `init_method` URLs; the file does not import os yet."""
from __future__ import annotations

import argparse

import torch.distributed as dist

parser = argparse.ArgumentParser()
parser.add_argument("--dist-url", default="tcp://127.0.0.1:23456", help="rendezvous URL")
args = parser.parse_args()


def setup(rank, world_size):
    dist.init_process_group("gloo", init_method=args.dist_url, rank=rank, world_size=world_size)


def setup_again(rank, world_size):
    url = 'tcp://localhost:12355'  # single quotes
    dist.init_process_group("gloo", init_method=url, rank=rank, world_size=world_size)
