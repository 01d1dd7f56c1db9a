"""The same MLP under torchrun: DDP, a DistributedSampler, the global batch split over ranks."""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--batch-size", type=int, default=32, help="global")
args = parser.parse_args()

dist.init_process_group("gloo")
rows = torch.load(args.data)
data = TensorDataset(rows["x"], rows["y"])
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
model = DDP(model)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
sampler = DistributedSampler(data, shuffle=True)
per_rank = args.batch_size // dist.get_world_size()
for epoch in range(3):
    sampler.set_epoch(epoch)
    for x, y in DataLoader(data, batch_size=per_rank, sampler=sampler):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
dist.destroy_process_group()
