"""Rank 1 is slow at every step (a busy machine, a slower device): the others wait for it in
each all-reduce."""

import time

import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
for _ in range(12):
    if dist.get_rank() == 1:
        time.sleep(0.15)
    train(steps=1)
