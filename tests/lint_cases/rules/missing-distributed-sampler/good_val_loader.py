import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset, random_split


def evaluate(model, loader):
    model.eval()
    with torch.no_grad():
        return sum(float(model(x).sum()) for x, _ in loader)


def main():
    dist.init_process_group("gloo")
    full = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    train_ds, val_ds = random_split(full, [900, 100])
    sampler = DistributedSampler(train_ds)
    train_loader = DataLoader(train_ds, batch_size=32, sampler=sampler)
    val_loader = DataLoader(val_ds, batch_size=64)
    testloader = DataLoader(TensorDataset(torch.randn(10, 8), torch.randn(10, 1)), batch_size=10)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        sampler.set_epoch(epoch)
        for x, y in train_loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        score = evaluate(model, val_loader) + evaluate(model, testloader)
        if int(os.environ["RANK"]) == 0:
            print(f"epoch {epoch} val score {score:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
