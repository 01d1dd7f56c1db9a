"""A rank that sleeps while the others wait in the next all-reduce (a slow rank-0 phase, a
straggler)."""

import time

import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train()
if dist.get_rank() == 1:
    time.sleep(120)
train()
