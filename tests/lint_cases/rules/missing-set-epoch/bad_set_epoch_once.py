import torch
import torch.distributed as dist
import torch.utils.data as data
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    dataset = data.TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    loader = data.DataLoader(
        dataset,
        batch_size=32,
        sampler=data.DistributedSampler(dataset, seed=1),  # expect: missing-set-epoch
    )
    loader.sampler.set_epoch(0)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for n_epoch in range(10):
        for x, y in loader:
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
