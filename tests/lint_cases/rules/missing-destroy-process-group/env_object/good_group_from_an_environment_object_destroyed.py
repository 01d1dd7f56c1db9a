"""The same environment object; the group destroyed at the end."""
import torch
import torch.distributed as dist
from tools.distenv import enable


def main():
    enable()
    torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
