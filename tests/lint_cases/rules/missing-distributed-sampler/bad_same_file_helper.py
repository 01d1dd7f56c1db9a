import torch
import torch.distributed as dist
import torch.utils.data as tud
from torch.nn.parallel import DistributedDataParallel as DDP


def make_loader(dataset, batch_size):
    return tud.DataLoader(dataset, batch_size=batch_size, shuffle=True)  # expect: missing-distributed-sampler


def main():
    dist.init_process_group("gloo")
    data = tud.TensorDataset(torch.randn(512, 8), torch.randn(512, 1))
    loader = make_loader(data, 32)
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.Adam(model.parameters())
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
