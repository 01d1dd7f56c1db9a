"""The wrapper class taken as a value: an alias, and a `functools.partial` with the device ids.
The unwrapped models are saved."""
import functools

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

Wrapper = DistributedDataParallel


def main():
    dist.init_process_group("gloo")
    make_ddp = functools.partial(DistributedDataParallel, find_unused_parameters=False)
    first = Wrapper(torch.nn.Linear(2, 2))
    second = make_ddp(torch.nn.Linear(2, 2))
    if dist.get_rank() == 0:
        torch.save(first.module.state_dict(), "first.pt")
        torch.save(second.module.state_dict(), "second.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
