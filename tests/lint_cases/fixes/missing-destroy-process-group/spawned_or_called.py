import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def main_worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    for epoch in range(3):
        pass


def main(world_size):
    if world_size > 1:
        # one process per rank: the group lives in the spawned workers
        mp.spawn(main_worker, args=(world_size,), nprocs=world_size)
    else:
        main_worker(0, 1)


if __name__ == "__main__":
    main(2)
