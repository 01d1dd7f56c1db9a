import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group(backend="gloo")
    try:
        model = DDP(torch.nn.Linear(8, 1))
        model(torch.randn(4, 8)).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
