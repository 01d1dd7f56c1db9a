import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import misc
from misc import save_on_master


def main():
    dist.init_process_group("gloo")
    net = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    net(torch.randn(4, 8)).sum().backward()
    opt.step()
    save_on_master(net.state_dict(), "last.pt")  # expect: wrapped-state-dict
    ckpt = {"net": net.state_dict(), "opt": opt.state_dict()}  # expect: wrapped-state-dict
    misc.save_checkpoint(ckpt, "ckpt.pt")
    save_on_master(net.module.state_dict(), "plain.pt")
    misc.log_metrics(net.state_dict())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
