"""The step is skipped on a non-finite loss, not every N iterations: each backward is a full step."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, optimizer, batches, temperature):
    for x, y in batches:
        loss = (model(x) / temperature - y).pow(2).mean()
        finite = bool(torch.isfinite(loss))
        loss.backward()
        if finite:
            optimizer.step()
        optimizer.zero_grad()


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(16)]
    train(model, optimizer, batches, 2.0)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
