"""The endless stream moves the sampler to the next epoch before each pass."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def forever(batches):
    epoch = 0
    while True:
        batches.sampler.set_epoch(epoch)
        for batch in batches:
            yield batch
        epoch += 1


def main():
    dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    sampler = DistributedSampler(dataset, shuffle=True)
    stream = forever(DataLoader(dataset, batch_size=32, sampler=sampler))
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(500):
        x, y = next(stream)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
