"""A launcher: it starts one worker per device, and each worker creates the process group."""
import torch.distributed as dist
import torch.multiprocessing as mp

__all__ = ["launch"]


def _worker(rank, main_func, world_size, args):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    main_func(*args)


def launch(main_func, num_processes=1, args=()):
    if num_processes > 1:
        mp.start_processes(_worker, nprocs=num_processes, args=(main_func, num_processes, args))
    else:
        main_func(*args)
