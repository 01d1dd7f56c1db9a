"""The sampler comes from a library function; the script sets the epoch on the loader's sampler."""
import os

import torch
import torch.distributed as dist
from good_library_sampler_factory import make_train_loader
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    loader = make_train_loader(32, rank=int(os.environ["RANK"]))
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(10):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
