"""Only rank 0 reaches the barrier: the other ranks skip it under a different condition."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def load_features(local_rank, evaluate=False):
    features = torch.randn(64, 8)
    if local_rank in (-1, 0) and not os.path.exists("features.pt"):
        torch.save(features, "features.pt")
    if local_rank == 0 and not evaluate:
        dist.barrier()  # expect: collective-under-rank-guard
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
