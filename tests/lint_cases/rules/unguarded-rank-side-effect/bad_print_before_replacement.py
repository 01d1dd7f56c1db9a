"""`builtins.print` is replaced only after the first metrics print: that one runs on every rank."""
import builtins
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).pow(2).mean()
    print(f"warm-up loss {loss.item():.4f}")  # expect: unguarded-rank-side-effect
    if rank != 0:
        builtins.print = lambda *args, **kwargs: None
    print(f"loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
