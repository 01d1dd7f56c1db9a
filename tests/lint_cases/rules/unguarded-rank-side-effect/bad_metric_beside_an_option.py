"""A label, an option and a result in one print: the result makes it a metric line, printed by
every rank."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-scale", type=float, default=128.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    print("loss scale", args.loss_scale, "loss", loss.item())  # expect: unguarded-rank-side-effect
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
