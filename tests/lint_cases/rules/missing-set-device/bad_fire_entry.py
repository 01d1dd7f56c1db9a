"""Started with `fire.Fire(main)`, no `__main__` block: still a program, one process per GPU."""
import os

import fire
import torch
import torch.distributed as dist


def main(steps: int = 10):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")  # expect: missing-set-device
    model = torch.nn.Linear(8, 8).cuda(local_rank)
    for _ in range(steps):
        model(torch.randn(4, 8).cuda(local_rank)).sum().backward()
    dist.destroy_process_group()


fire.Fire(main)
