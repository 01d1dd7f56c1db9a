"""`--search` is refused in a distributed run, so its branch runs in a single process."""
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
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss = model(torch.randn(4, 8)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--search", action="store_true")
    opt = parser.parse_args()
    if LOCAL_RANK != -1:
        assert not opt.search, "--search runs in one process only"
        dist.init_process_group("gloo")
    if not opt.search:
        train(0.1)
    else:
        results = {lr: train(lr) for lr in (0.01, 0.1)}
        with open("search.json", "w") as f:
            json.dump(results, f)
    if LOCAL_RANK != -1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
