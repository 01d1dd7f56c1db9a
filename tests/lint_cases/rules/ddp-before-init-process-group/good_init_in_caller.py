import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def wrap(model):
    return DDP(model)


def setup():
    if not dist.is_initialized():
        dist.init_process_group("gloo")


def main():
    setup()
    model = wrap(torch.nn.Linear(10, 10))
    model(torch.randn(4, 10)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
