"""`args.save_logs` is computed once from a rank-0 test; everything under it runs on rank 0."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.tensorboard import SummaryWriter


def is_master(args):
    return args.rank == 0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--logs", default="./logs")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    args.rank = dist.get_rank()
    args.save_logs = args.logs and args.logs.lower() != "none" and is_master(args)
    writer = None
    if args.save_logs:
        writer = SummaryWriter(args.logs)
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    if args.save_logs:
        writer.add_scalar("loss", loss.item())
        torch.save({"state_dict": model.module.state_dict()}, "epoch_latest.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
