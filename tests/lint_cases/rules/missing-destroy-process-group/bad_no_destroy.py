import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group(backend="gloo")  # expect: missing-destroy-process-group
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
