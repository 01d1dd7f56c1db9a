import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader
from torch.utils.data.distributed import DistributedSampler

from helper_loaders import build_train_loader


def distributed_loader(loader):
    sampler = DistributedSampler(loader.dataset, shuffle=True)
    return DataLoader(loader.dataset, batch_size=loader.batch_size, sampler=sampler)


def main():
    dist.init_process_group("gloo")
    loader = distributed_loader(build_train_loader(batch_size=64))
    model = DDP(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loader.sampler.set_epoch(epoch)
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
