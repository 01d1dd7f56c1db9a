"""A set-up helper for good_print_silenced_by_setup.py: other ranks print only with force=True."""
import builtins
import os

import torch.distributed as dist


def _quiet_print_unless_main(is_main):
    original = builtins.print

    def gated_print(*args, **kwargs):
        if kwargs.pop("force", False) or is_main:
            original(*args, **kwargs)

    builtins.print = gated_print


def init_distributed_mode(args):
    args.rank = int(os.environ.get("RANK", 0))
    dist.init_process_group("gloo")
    _quiet_print_unless_main(args.rank == 0)
