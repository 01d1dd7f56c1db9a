"""Every rank-0 guard style the rule recognises."""
import json
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def rank_zero_only(fn):
    def wrapper(*args, **kwargs):
        if dist.get_rank() == 0:
            return fn(*args, **kwargs)
        return None

    return wrapper


@rank_zero_only
def log_metrics(metrics):
    with open("metrics.json", "w") as f:
        json.dump(metrics, f)


def save(model, path):
    torch.save(model.module.state_dict(), path)


def write_summary(loss):
    if dist.get_rank() != 0:
        return
    print(f"final loss {loss:.4f}")


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    is_main = rank == 0
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if rank == 0:
            print(f"epoch {epoch} loss {loss.item():.4f}")
        if is_main and epoch % 2 == 0:
            save(model, f"epoch{epoch}.pt")
        if not rank:
            torch.save(opt.state_dict(), "opt.pt")
        if local_rank in (-1, 0):
            print(f"accuracy {0.5:.2f}")
        print(f"rank {rank}: epoch {epoch} loss {loss.item():.4f}")
        torch.save(opt.state_dict(), f"opt_rank{rank}.pt")
    log_metrics({"loss": loss.item()})
    write_summary(loss.item())
    if dist.get_rank() == 0:
        torch.save(model.module.state_dict(), "final.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
