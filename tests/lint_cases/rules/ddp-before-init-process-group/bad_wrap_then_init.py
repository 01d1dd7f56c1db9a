import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    model = DDP(torch.nn.Linear(10, 10))  # expect: ddp-before-init-process-group
    dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
    model(torch.randn(4, 10)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
