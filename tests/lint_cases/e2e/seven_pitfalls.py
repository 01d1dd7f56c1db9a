"""A small DDP script with every fixable pitfall; runs on CPU with gloo under torchrun."""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.block = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = checkpoint(self.block, x)  # recompute in backward
        return self.head(torch.relu(h))


def main(out):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(64, 8), torch.randn(64, 1))
    sampler = DistributedSampler(data, num_replicas=world, rank=rank)
    loader = DataLoader(data, batch_size=8, shuffle=True, sampler=sampler)  # shuffled
    os.environ["MASTER_PORT"] = "29400"  # the port everyone uses
    dist.init_process_group("gloo")
    model = DDP(Net())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    firsts = []
    for epoch in range(2):
        for i, (x, y) in enumerate(loader):
            with torch.cpu.amp.autocast(enabled=False):
                loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            if i == 0:
                firsts.append(x[0].tolist())
    if rank == 0:
        torch.save({"model": model.state_dict(), "firsts": firsts}, out)


if __name__ == "__main__":
    main(sys.argv[1])
