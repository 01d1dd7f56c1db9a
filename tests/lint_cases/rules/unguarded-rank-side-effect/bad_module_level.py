"""torchrun --nproc_per_node=2 bad_module_level.py"""
import os

import numpy as np
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
rank = int(os.environ["RANK"])
model = DDP(torch.nn.Linear(8, 1))
losses = []
for step in range(10):
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    losses.append(loss.item())
if rank == 0:
    print("training finished")
np.save("losses.npy", np.array(losses))  # expect: unguarded-rank-side-effect
torch.save(model.module.state_dict(), "final.pt")  # expect: unguarded-rank-side-effect
dist.destroy_process_group()
