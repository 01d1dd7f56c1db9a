"""The same set-up in a library function: whoever calls it owns the process, so nothing here is
reported (no `__main__` block, no entry point, no console script names this module)."""
import os

import torch
import torch.distributed as dist


def main(steps: int = 10):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    model = torch.nn.Linear(8, 8).cuda(local_rank)
    for _ in range(steps):
        model(torch.randn(4, 8).cuda(local_rank)).sum().backward()
    dist.destroy_process_group()
