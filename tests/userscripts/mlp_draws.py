"""The MLP under torchrun with nanoGPT's way of batching: no sampler, each rank draws random row
indices every step from a generator seeded per rank. As many rows per step as mlp_single.py,
but other ones: a data order that is not a sampler's."""

import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--batch-size", type=int, default=32, help="global")
parser.add_argument("--steps", type=int, default=24)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(1337 + rank)
rows = torch.load(args.data)
x_all, y_all = rows["x"], rows["y"]
model = DDP(torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1)))
opt = torch.optim.SGD(model.parameters(), lr=0.05)


def get_batch():
    ix = torch.randint(len(x_all), (args.batch_size // world,))
    return x_all[ix], y_all[ix]


for step in range(args.steps):
    x, y = get_batch()
    opt.zero_grad()
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
dist.destroy_process_group()
