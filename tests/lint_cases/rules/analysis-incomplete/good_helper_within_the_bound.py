"""The set-up helper reaches init_process_group two modules down (e -> f): followed to the end,
nothing to say about the bound (and the group is destroyed)."""
import torch
import torch.distributed as dist
from pkg.e import step


def main():
    step()
    torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
