import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def main():
    dist.init_process_group("gloo")
    val_ds = TensorDataset(torch.randn(100, 8), torch.randn(100, 1))
    eval_sampler = DistributedSampler(val_ds, shuffle=False)
    val_loader = DataLoader(val_ds, batch_size=32, sampler=eval_sampler)
    model = DDP(torch.nn.Linear(8, 1))
    for epoch in range(3):
        with torch.no_grad():
            total = sum(float(model(x).sum()) for x, _ in val_loader)
        dist.all_reduce(torch.tensor(total))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
