import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from helper_dist import seed_everything, setup_distributed


def run(cfg):
    setup_distributed(cfg)
    seed_everything(0)
    try:
        model = DDP(torch.nn.Linear(8, 1))
        model(torch.randn(4, 8)).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    run(None)
