"""The evaluation branch asserts that it runs in one process: nothing there is duplicated."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true")
    parser.add_argument("--evaluate", action="store_true")
    args = parser.parse_args()
    if args.distributed:
        dist.init_process_group("gloo")
    model = torch.nn.Linear(8, 1)
    if args.evaluate:
        assert not args.distributed, "evaluation runs in a single process"
        loss = model(torch.randn(4, 8)).pow(2).mean()
        print(f"eval loss {loss.item():.4f}")
        torch.save(model.state_dict(), "evaluated.pt")
        return
    model = DDP(model) if args.distributed else model
    loss = model(torch.randn(4, 8)).sum()
    loss.backward()
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
