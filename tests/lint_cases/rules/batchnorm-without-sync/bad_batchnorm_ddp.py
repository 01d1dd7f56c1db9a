import os

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    model = nn.Sequential(nn.Conv2d(3, 16, 3), nn.BatchNorm2d(16), nn.ReLU()).cuda()
    model = DDP(model, device_ids=[local_rank])  # expect: batchnorm-without-sync
    model(torch.randn(2, 3, 32, 32).cuda()).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
