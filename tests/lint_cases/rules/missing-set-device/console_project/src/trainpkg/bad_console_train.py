"""Run by the console script `trainpkg-train` that pyproject.toml declares: a program."""

import os

import torch
import torch.distributed as dist


def main(steps: int = 10):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")  # expect: missing-set-device
    model = torch.nn.Linear(8, 8).cuda(local_rank)
    for _ in range(steps):
        model(torch.randn(4, 8).cuda(local_rank)).sum().backward()
    dist.destroy_process_group()
