"""--dist-url defaults to an address a job runs at unchanged: two jobs on the node collide."""
import argparse

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-url", default="tcp://10.1.1.20:23456", type=str)
    args = parser.parse_args()
    dist.init_process_group("gloo", init_method=args.dist_url, rank=0, world_size=1)  # expect: hardcoded-master-port
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
