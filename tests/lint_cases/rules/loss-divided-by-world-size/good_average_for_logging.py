import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, optimizer, batches):
    world_size = int(os.environ["WORLD_SIZE"])
    rank = int(os.environ["RANK"])
    for x, y in batches:
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()  # DDP averages the gradients
        loss.backward()
        optimizer.step()
        logged = loss.detach().clone()
        dist.all_reduce(logged)
        logged = logged / world_size  # the mean over ranks, for the log only
        if rank == 0:
            print(f"loss {logged.item():.4f}")


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]
    train(model, optimizer, batches)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
