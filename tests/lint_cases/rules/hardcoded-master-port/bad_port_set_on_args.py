"""The launcher writes a fixed port into the options it hands to every worker."""
import argparse

import torch.distributed as dist
import torch.multiprocessing as mp


def worker(gpu, args):
    dist.init_process_group("gloo", init_method=args.dist_url, rank=gpu, world_size=args.world_size)  # expect: hardcoded-master-port
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=1)
    args = parser.parse_args()
    args.world_size = 2
    if args.nodes > 1:
        args.dist_url = f"tcp://{args.host}:58472"
    else:
        args.dist_url = "tcp://localhost:58472"
    mp.spawn(worker, (args,), nprocs=args.world_size)


if __name__ == "__main__":
    main()
