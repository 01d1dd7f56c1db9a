"""A rank that runs out of memory under its limit (the address space capped, as a cgroup or a
scheduler caps it), while the other waits for it in the next all-reduce."""

import resource

import torch
import torch.distributed as dist
from common import train

dist.init_process_group("gloo")
train()
if dist.get_rank() == 1:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, hard))
    activations = torch.empty(16 * 2**30, dtype=torch.uint8)
train()
