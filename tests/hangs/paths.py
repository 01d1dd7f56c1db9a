"""Ranks that took different paths: rank 0 broadcasts while rank 1 all-reduces, at the same
sequence number."""

import torch
import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train()
t = torch.ones(3)
if dist.get_rank() == 0:
    dist.broadcast(t, 0)
else:
    dist.all_reduce(t)
