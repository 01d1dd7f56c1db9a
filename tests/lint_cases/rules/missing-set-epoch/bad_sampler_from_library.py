"""The sampler comes from a library function; this script iterates epochs without set_epoch."""
import os

import torch
import torch.distributed as dist
from good_library_sampler_factory import make_train_loader
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    loader = make_train_loader(32, rank=int(os.environ["RANK"]))  # expect: missing-set-epoch
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    while True:
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if loss.item() < 0.1:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
