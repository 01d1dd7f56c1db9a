"""The epoch loop's variable is `_`; the range it walks counts epochs. No set_epoch anywhere."""
import argparse

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


def train(args, model, dataset):
    sampler = DistributedSampler(dataset)  # expect: missing-set-epoch
    loader = DataLoader(dataset, batch_size=32, sampler=sampler)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train_iterator = range(int(args.num_train_epochs))
    for _ in train_iterator:
        for step, (x, y) in enumerate(loader):
            loss = (model(x) - y).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--num-train-epochs", type=float, default=3.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    dataset = TensorDataset(torch.randn(1000, 8), torch.randn(1000, 1))
    train(args, DDP(torch.nn.Linear(8, 1)), dataset)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
