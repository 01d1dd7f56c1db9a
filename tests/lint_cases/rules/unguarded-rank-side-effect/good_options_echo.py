"""Every rank echoes its options at start-up (a loss-scale setting is an option, not a result);
the metrics are printed by rank 0 only."""
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-scale", type=str, default="dynamic")
    args = parser.parse_args()
    print("loss_scale = {}".format(args.loss_scale))
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    if int(os.environ["RANK"]) == 0:
        print(f"loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
