import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--find-unused-parameters", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1), find_unused_parameters=args.find_unused_parameters)
    frozen = DDP(torch.nn.Linear(8, 1), find_unused_parameters=False, static_graph=True)
    optimizer = torch.optim.SGD([*model.parameters(), *frozen.parameters()], lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        (model(torch.randn(4, 8)).sum() + frozen(torch.randn(4, 8)).sum()).backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
