"""A set-up helper whose port parameter defaults to a literal, and no caller passes another."""
import os

import torch.distributed as dist


def init_distributed(port=40112, rank=0, world_size=1):
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = str(port)  # expect: hardcoded-master-port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)


def main():
    init_distributed(rank=int(os.environ["RANK"]), world_size=int(os.environ["WORLD_SIZE"]))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
