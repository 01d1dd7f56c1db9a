import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, world_size):
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    for step in range(3):
        pass  # train
    return 0  # exit status


if __name__ == "__main__":
    mp.spawn(worker, args=(2,), nprocs=2)
