"""Under torchrun, rank 1 waits forever before its first step; rank 0 waits for it in DDP."""

import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
if dist.get_rank() == 1:
    while True:
        time.sleep(0.2)
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(10):
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
