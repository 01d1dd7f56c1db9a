import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    world_size = int(os.environ.get("WORLD_SIZE", 1))
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    model = torch.nn.Linear(8, 1)
    sampler = None
    if world_size > 1:
        dist.init_process_group("gloo")
        model = DDP(model)
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    else:
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(2):
        if sampler is not None:
            sampler.set_epoch(epoch)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    if world_size > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
