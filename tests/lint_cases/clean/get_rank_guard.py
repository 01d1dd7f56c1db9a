"""Metrics written as JSON and CSV, only by the process whose dist.get_rank() is 0."""
import csv
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group(backend="gloo")
    world_size = dist.get_world_size()
    model = DDP(torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    dataset = TensorDataset(torch.randn(1600, 16), torch.randn(1600, 1))
    sampler = DistributedSampler(dataset)
    loader = DataLoader(dataset, batch_size=16, sampler=sampler)
    history = []
    for epoch in range(3):
        sampler.set_epoch(epoch)
        running = torch.zeros(1)
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            running += loss.detach()
        dist.all_reduce(running)
        history.append({"epoch": epoch, "loss": running.item() / (len(loader) * world_size)})
        if dist.get_rank() == 0:
            print(f"epoch {epoch}: mean loss {history[-1]['loss']:.5f}")
    if dist.get_rank() == 0:
        os.makedirs("results", exist_ok=True)
        with open("results/history.json", "w") as f:
            json.dump(history, f, indent=2)
        with open("results/history.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["epoch", "loss"])
            writer.writeheader()
            writer.writerows(history)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
