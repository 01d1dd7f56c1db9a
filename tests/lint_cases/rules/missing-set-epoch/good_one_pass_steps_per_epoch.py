"""One pass over the data, counted in steps: a single epoch needs no set_epoch."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def main():
    dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    loader = DataLoader(dataset, batch_size=32, sampler=DistributedSampler(dataset))
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = iter(loader)
    steps_per_epoch = len(loader)
    for _ in range(steps_per_epoch):
        x, y = next(batches)
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
