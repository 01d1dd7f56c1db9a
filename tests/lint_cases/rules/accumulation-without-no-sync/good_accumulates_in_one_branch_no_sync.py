import contextlib

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

ACCUMULATION_STEPS = 4


def train_one_epoch(model, loader, optimizer, scaler):
    for idx, (x, y) in enumerate(loader):
        if ACCUMULATION_STEPS > 1:
            last = (idx + 1) % ACCUMULATION_STEPS == 0
            with contextlib.nullcontext() if last else model.no_sync():
                loss = model(x).sum() / ACCUMULATION_STEPS
                scaler.scale(loss).backward()
            if last:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad()
        else:
            loss = model(x).sum()
            optimizer.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(2, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    train_one_epoch(model, [], optimizer, torch.amp.GradScaler("cuda"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
