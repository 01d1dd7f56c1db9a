"""Status lines, prints every rank makes on purpose, and messages on an error path."""
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    print("start training; the loss is logged by rank 0")
    loss = model(torch.randn(4, 8)).sum()
    if not torch.isfinite(loss):
        print(f"loss is {loss.item()}, stopping")
        sys.exit(1)
    if loss.item() > 1e6:
        print(f"loss diverged: {loss.item()}")
        raise RuntimeError("diverged")
    print(f"local loss {loss.item():.4f}", force=True)
    loss.backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
