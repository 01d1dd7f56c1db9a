import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, optimizer, batches, k):
    for it, (x, y) in enumerate(batches):
        update = (it + 1) % k == 0
        loss = (model(x) - y).pow(2).mean()
        loss = loss / k
        loss.backward()  # expect: accumulation-without-no-sync
        if update:
            optimizer.step()
            optimizer.zero_grad()


def train_counter(model, optimizer, batches, every):
    seen = 0
    for x, y in batches:
        (model(x) - y).pow(2).mean().div(every).backward()  # expect: accumulation-without-no-sync
        seen += 1
        if seen == every:
            seen = 0
            optimizer.step()
            optimizer.zero_grad()


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = [(torch.randn(4, 8), torch.randn(4, 1)) for _ in range(16)]
    train(model, optimizer, batches, 4)
    train_counter(model, optimizer, batches, 4)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
