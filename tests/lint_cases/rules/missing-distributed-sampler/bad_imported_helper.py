import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from helper_loaders import build_loader_for_rank, build_train_loader


def main():
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    loader = build_train_loader(batch_size=64)  # expect: missing-distributed-sampler
    sharded = build_loader_for_rank(64, rank, world)
    model = DDP(torch.nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        for batches in (loader, sharded):
            for x, y in batches:
                loss = torch.nn.functional.cross_entropy(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
