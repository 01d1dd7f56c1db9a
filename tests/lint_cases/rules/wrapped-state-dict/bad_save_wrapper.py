import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save_checkpoint(model, optimizer, path):
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict()}  # expect: wrapped-state-dict
    torch.save(state, path)


def main():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(8, 1)
    model = DDP(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(4, 8)).sum().backward()
    opt.step()
    if int(os.environ["RANK"]) == 0:
        torch.save(model.state_dict(), "model.pt")  # expect: wrapped-state-dict
        save_checkpoint(model, opt, "ckpt.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
