"""Rank 0 builds the cache first while the others wait; both barriers carry the same extra test."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_features(local_rank, evaluate=False):
    if local_rank not in (-1, 0) and not evaluate:
        dist.barrier()  # the other ranks wait for rank 0 to write the cache
    features = torch.randn(64, 8)
    if local_rank in (-1, 0) and not os.path.exists("features.pt"):
        torch.save(features, "features.pt")
    if local_rank == 0 and not evaluate:
        dist.barrier()  # rank 0 releases them
    return features


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("gloo")
    features = load_features(local_rank)
    model = DDP(torch.nn.Linear(8, 1))
    model(features).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
