"""A job that trains and ends with its own exit code (3)."""

import sys

import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train(steps=5)
print(f"rank {dist.get_rank()} trained", flush=True)
dist.destroy_process_group()
sys.exit(3)
