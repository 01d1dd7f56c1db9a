import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, IterableDataset, Subset, TensorDataset


class TokenStream(IterableDataset):
    def __init__(self, rank, world_size):
        self.rank, self.world_size = rank, world_size

    def __iter__(self):
        for i in range(self.rank, 10_000, self.world_size):
            yield torch.full((8,), float(i))


def main():
    dist.init_process_group("gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    full = TensorDataset(torch.randn(1000, 8))
    mine = Subset(full, range(rank, len(full), world_size))
    loader = DataLoader(mine, batch_size=32, shuffle=True)
    stream = DataLoader(TokenStream(rank, world_size), batch_size=32)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batches in (loader, stream):
        for batch in batches:
            x = batch[0] if isinstance(batch, list) else batch
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
