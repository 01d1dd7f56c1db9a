"""Each rank reads its own shard of rows, unequal in length (no DistributedSampler): rank 0
has one batch more, so in its last step DDP's gradient all-reduce waits for rank 1, which
has ended its pass (pytorch/pytorch#33148)."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset

dist.init_process_group("gloo")
rank = dist.get_rank()
rows = 40 if rank == 0 else 32  # 5 batches of 8 against 4
data = TensorDataset(torch.randn(rows, 4), torch.randn(rows, 1))
model = DDP(torch.nn.Linear(4, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for x, y in DataLoader(data, batch_size=8):
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    opt.zero_grad()
dist.barrier()
