import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    net = torch.nn.Linear(8, 1)
    model = DDP(net)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    raw_model = model.module if isinstance(model, DDP) else model
    if int(os.environ["RANK"]) == 0:
        torch.save(model.module.state_dict(), "a.pt")
        torch.save(net.state_dict(), "b.pt")
        torch.save({"model": raw_model.state_dict(), "opt": opt.state_dict()}, "c.pt")
    model = model.module
    if int(os.environ["RANK"]) == 0:
        torch.save(model.state_dict(), "d.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
