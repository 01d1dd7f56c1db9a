"""`save` is true on rank 0, but `--force-save` turns it on for every rank."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--force-save", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    save = dist.get_rank() == 0
    if args.force_save:
        save = True
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).pow(2).mean().backward()
    if save:
        torch.save({"state_dict": model.module.state_dict()}, "last.pt")  # expect: unguarded-rank-side-effect
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
