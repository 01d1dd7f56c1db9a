"""A rank that raises while the others wait for it; its error ends the job with its exit code."""

import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train()
if dist.get_rank() == 1:
    raise ValueError("rank 1 found a bad batch")
train()
