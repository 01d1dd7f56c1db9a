"""A metric printed before the set-up helper that silences `print` (two modules down) runs on
every rank."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from pkg.setup import init_distributed_mode


def main():
    loss = torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum()
    print("loss before the set-up", loss.item())  # expect: unguarded-rank-side-effect
    init_distributed_mode()
    model = DDP(torch.nn.Linear(2, 2))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
