import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def run():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")
    device = torch.device("cuda", local_rank)
    net = DistributedDataParallel(  # expect: missing-set-device
        torch.nn.Linear(8, 8).to(device), device_ids=[local_rank]
    )
    torch.cuda.set_device(local_rank)
    out = net(torch.randn(4, 8, device=device))
    out.sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    run()
