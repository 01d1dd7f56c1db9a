import argparse

import torch
from torch.nn.parallel import DistributedDataParallel as DDP

import helper_dist
from helper_dist import setup_distributed


def run(cfg):
    setup_distributed(cfg)  # expect: missing-destroy-process-group
    helper_dist.seed_everything(0)
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).sum().backward()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", default="gloo")
    run(parser.parse_args())
