"""The launcher picks a port at random from the ephemeral range for the options it hands out."""
import argparse
import random

import torch.distributed as dist
import torch.multiprocessing as mp


def worker(gpu, args):
    dist.init_process_group("gloo", init_method=args.dist_url, rank=gpu, world_size=args.world_size)
    dist.destroy_process_group()


def main():
    args = argparse.ArgumentParser().parse_args()
    args.world_size = 2
    args.dist_url = f"tcp://localhost:{random.randrange(49152, 65535)}"
    mp.spawn(worker, (args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
