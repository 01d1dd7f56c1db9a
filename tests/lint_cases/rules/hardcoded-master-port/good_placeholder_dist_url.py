"""--dist-url defaults to an address nobody can meet at (as PyTorch's ImageNet example does): the
user must replace the whole URL, port included, so the default's port collides with nothing."""
import argparse

import torch.distributed as dist


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dist-url", default="tcp://224.66.41.62:23456", type=str)
    parser.add_argument("--doc-url", default="tcp://192.0.2.10:23456", type=str)
    args = parser.parse_args()
    dist.init_process_group("gloo", init_method=args.dist_url, rank=0, world_size=1)
    dist.init_process_group("gloo", init_method=args.doc_url, rank=0, world_size=1)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
