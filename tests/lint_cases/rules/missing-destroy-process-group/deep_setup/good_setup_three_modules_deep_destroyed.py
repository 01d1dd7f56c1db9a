"""The same deep set-up, destroyed at the end, and the file written by rank 0 only."""
import torch
import torch.distributed as dist
from pkg.setup import init_dist


def main():
    init_dist("pytorch")
    model = torch.nn.Linear(2, 2)
    model(torch.randn(1, 2)).sum().backward()
    if dist.get_rank() == 0:
        torch.save(model.state_dict(), "model.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
