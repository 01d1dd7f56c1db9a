"""A torchrun script as users write it for GPUs: NCCL, its LOCAL_RANK's device, DDP."""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
model = DDP(torch.nn.Linear(64, 8).cuda(local), device_ids=[local])
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(20):
    x = torch.randn(32, 64, device=f"cuda:{local}")
    model(x).square().mean().backward()
    opt.step()
    opt.zero_grad()
dist.destroy_process_group()
