"""The set-up helper silences `print` on the other ranks through a helper of another module: the
metric print after it is rank 0's only."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from pkg.setup import init_distributed_mode


def main():
    init_distributed_mode()
    model = DDP(torch.nn.Linear(2, 2))
    loss = model(torch.randn(1, 2)).sum()
    print("loss", loss.item())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
