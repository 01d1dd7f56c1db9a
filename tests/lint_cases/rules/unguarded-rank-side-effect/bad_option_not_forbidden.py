"""Only `--profile` is refused in a distributed run; `--search` is not: every rank writes the file."""
import argparse
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

LOCAL_RANK = int(os.getenv("LOCAL_RANK", -1))


def train(lr):
    model = torch.nn.Linear(8, 1)
    if LOCAL_RANK != -1:
        model = DDP(model)
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--search", action="store_true")
    parser.add_argument("--profile", action="store_true")
    opt = parser.parse_args()
    if LOCAL_RANK != -1:
        assert not opt.profile, "--profile runs in one process only"
        dist.init_process_group("gloo")
    if opt.search:
        results = {lr: train(lr) for lr in (0.01, 0.1)}
        with open("search.json", "w") as f:  # expect: unguarded-rank-side-effect
            json.dump(results, f)
    if LOCAL_RANK != -1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
