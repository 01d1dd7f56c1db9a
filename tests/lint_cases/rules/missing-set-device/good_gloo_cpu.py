"""CPU-only DDP with gloo: no GPU, no set_device needed."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(10, 10))
    model(torch.randn(4, 10)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
