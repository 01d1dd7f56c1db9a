"""The set-up helper reaches init_process_group six modules down (a -> b -> c -> d -> e -> f):
past the bound, which the analysis says instead of judging the script clean."""
import os

import torch
from pkg.a import setup_distributed


def main():
    local_rank = int(os.environ["LOCAL_RANK"])
    setup_distributed()  # expect: analysis-incomplete
    torch.nn.Linear(2, 2)(torch.randn(1, 2)).sum().backward()
    print(local_rank)


if __name__ == "__main__":
    main()
