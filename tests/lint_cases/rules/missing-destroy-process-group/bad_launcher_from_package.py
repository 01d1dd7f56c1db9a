"""The package's launcher creates the process group in its workers; nothing destroys it."""
import torch
from helper_launchpkg import launch
from torch.nn.parallel import DistributedDataParallel as DDP


def main(steps):
    model = DDP(torch.nn.Linear(8, 1))
    for _ in range(steps):
        model(torch.randn(4, 8)).sum().backward()


if __name__ == "__main__":
    launch(main, num_processes=2, args=(10,))  # expect: missing-destroy-process-group
