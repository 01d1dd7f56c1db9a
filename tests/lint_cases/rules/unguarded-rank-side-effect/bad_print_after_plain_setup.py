"""A set-up helper that does not touch `print`: every rank still prints the loss."""
import torch
import torch.distributed as dist
from helper_plain_setup import setup_distributed
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    setup_distributed()
    model = DDP(torch.nn.Linear(8, 1))
    loss = model(torch.randn(4, 8)).pow(2).mean()
    loss.backward()
    print(f"loss {loss.item():.4f}")  # expect: unguarded-rank-side-effect
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
