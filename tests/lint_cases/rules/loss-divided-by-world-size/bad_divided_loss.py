import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, optimizer, batches, scaler):
    world_size = int(os.environ["WORLD_SIZE"])
    for x, y in batches:
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean() / world_size  # expect: loss-divided-by-world-size
        loss.backward()
        optimizer.step()
    for x, y in batches:
        optimizer.zero_grad()
        loss = (model(x) - y).pow(2).mean()
        loss /= dist.get_world_size()  # expect: loss-divided-by-world-size
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    for x, y in batches:
        optimizer.zero_grad()
        ((model(x) - y).abs().mean() / world_size).backward()  # expect: loss-divided-by-world-size
        optimizer.step()


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", enabled=False)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(4)]
    train(model, optimizer, batches, scaler)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
