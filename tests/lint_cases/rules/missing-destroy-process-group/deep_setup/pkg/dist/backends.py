import os

import torch.distributed as dist


def _init_dist_pytorch():
    _really_init(int(os.environ["RANK"]))


def _really_init(rank):
    from pkg.dist import low
    low.start(rank)
