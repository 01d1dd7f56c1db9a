import os

import torch.distributed as dist

from pkg.quiet import quiet_print


def init_distributed_mode():
    dist.init_process_group("gloo")
    quiet_print(int(os.environ["RANK"]) == 0)
