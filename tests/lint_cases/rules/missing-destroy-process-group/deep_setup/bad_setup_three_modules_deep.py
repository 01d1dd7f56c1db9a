"""The process group is made three modules down: init_dist -> _init_dist_pytorch -> low.start.
The script owns it, and every rank runs what follows."""
import torch
from pkg.setup import init_dist


def main():
    init_dist("pytorch")  # expect: missing-destroy-process-group
    model = torch.nn.Linear(2, 2)
    model(torch.randn(1, 2)).sum().backward()
    torch.save(model.state_dict(), "model.pt")  # expect: unguarded-rank-side-effect


if __name__ == "__main__":
    main()
