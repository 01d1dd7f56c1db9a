"""Under torchrun, rank 1 raises at its third step."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(10):
    if step == 2 and dist.get_rank() == 1:
        raise ValueError("the batch on rank 1 is empty")
    model(torch.ones(2, 4)).sum().backward()
    opt.step()
