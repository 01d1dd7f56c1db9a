"""The worker replaces `builtins.print` itself on the other ranks; later prints are silent there."""
import builtins
import os

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def evaluate(model):
    loss = model(torch.randn(4, 8)).pow(2).mean()
    print(f"eval loss {loss.item():.4f}")
    return loss


def worker(rank, world_size):
    if rank != 0:

        def silent(*args, **kwargs):
            pass

        builtins.print = silent
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(8, 1))
    loss = evaluate(model)
    print(f"final loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
