"""The __main__ block of an mp.spawn script runs once, in the parent process."""
import json

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def worker(rank, world_size, results):
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world_size)
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(16, 8)).pow(2).mean()
    loss.backward()
    results[rank] = loss.item()
    dist.destroy_process_group()


if __name__ == "__main__":
    manager = mp.Manager()
    results = manager.dict()
    mp.spawn(worker, args=(2, results), nprocs=2)
    print(f"mean loss {sum(results.values()) / 2:.4f}")
    with open("results.json", "w") as f:
        json.dump(dict(results), f)
