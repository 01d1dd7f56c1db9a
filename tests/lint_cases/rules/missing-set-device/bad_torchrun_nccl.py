"""torchrun --nproc_per_node=4 train.py"""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group(backend="nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    model = torch.nn.Linear(1000, 10).cuda(local_rank)
    model = DDP(model, device_ids=[local_rank])  # expect: missing-set-device
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for step in range(100):
        x = torch.randn(32, 1000, device=f"cuda:{local_rank}")
        loss = model(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
