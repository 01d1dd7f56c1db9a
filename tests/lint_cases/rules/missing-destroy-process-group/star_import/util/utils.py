import builtins
import os

import torch.distributed as dist


def init_distributed_mode(args):
    rank = int(os.environ["RANK"])
    dist.init_process_group("gloo", rank=rank, world_size=int(os.environ["WORLD_SIZE"]))
    builtin_print = builtins.print

    def print(*values, **kwargs):
        if rank == 0 or kwargs.pop("force", False):
            builtin_print(*values, **kwargs)

    builtins.print = print
