"""The options echoed with labels that name a metric ("Loss scaling", "Accuracy target"): every
value printed is an option, so it is an echo, not a result."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--loss-scale", type=float, default=128.0)
    parser.add_argument("--target-acc", type=float, default=0.76)
    hparams = parser.parse_args()
    print("Loss scaling:", hparams.loss_scale)
    print(f"Accuracy target: {hparams.target_acc}")
    print("best loss so far: %s" % hparams.loss_scale)
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    model(torch.randn(4, 8)).pow(2).mean().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
