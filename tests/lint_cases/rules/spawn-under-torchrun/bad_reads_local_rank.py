import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(local_rank)
    model = DDP(torch.nn.Linear(10, 10).cuda(local_rank), device_ids=[local_rank])
    model(torch.randn(4, 10).cuda(local_rank)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = torch.cuda.device_count()
    mp.spawn(worker, args=(world_size,), nprocs=world_size)  # expect: spawn-under-torchrun
