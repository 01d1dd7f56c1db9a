"""Accumulation whose non-final micro-steps run under a sibling helper that calls `no_sync()`."""
import torch
import torch.distributed as dist
from helper_sync_context import maybe_sync
from torch.nn.parallel import DistributedDataParallel as DDP


def main(rounds=4):
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(10):
        opt.zero_grad()
        for round_idx in range(rounds):
            with maybe_sync(model, round_idx == rounds - 1):
                loss = model(torch.randn(4, 8)).pow(2).mean() / rounds
                loss.backward()
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
