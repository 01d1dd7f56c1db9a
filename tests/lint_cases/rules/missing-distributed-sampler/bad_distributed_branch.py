import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset


def main(args):
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    model = torch.nn.Linear(8, 1)
    if args.distributed:
        dist.init_process_group("gloo")
        model = DDP(model)
        loader = DataLoader(dataset, batch_size=32, shuffle=True)  # expect: missing-distributed-sampler
    else:
        loader = DataLoader(dataset, batch_size=32, shuffle=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = (model(x) - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if args.distributed:
        dist.destroy_process_group()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--distributed", action="store_true")
    main(parser.parse_args())
