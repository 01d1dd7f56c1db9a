"""The package's launcher creates the process group; the main function destroys it when done."""
import torch
import torch.distributed as dist
from helper_launchpkg import launch
from torch.nn.parallel import DistributedDataParallel as DDP


def main(steps):
    model = DDP(torch.nn.Linear(8, 1))
    try:
        for _ in range(steps):
            model(torch.randn(4, 8)).sum().backward()
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    launch(main, num_processes=2, args=(10,))
