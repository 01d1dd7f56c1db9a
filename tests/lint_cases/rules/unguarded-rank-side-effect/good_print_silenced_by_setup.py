"""The set-up helper (a sibling module) replaces `print` with one that is silent on other ranks."""
import argparse

import torch
import torch.distributed as dist
from helper_quiet_print import init_distributed_mode
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    print(f"train loss {loss.item():.4f}")


def main():
    args = argparse.Namespace()
    init_distributed_mode(args)
    model = DDP(torch.nn.Linear(8, 1))
    train(model)
    print(f"final loss {model(torch.randn(4, 8)).sum().item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
