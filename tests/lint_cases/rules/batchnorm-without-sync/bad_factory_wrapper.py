import torch
import torch.distributed as dist

from helper_parallel import wrap_for_ranks


def main():
    dist.init_process_group("gloo")
    net = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.BatchNorm1d(4))
    net = wrap_for_ranks(net, dist.get_rank())  # expect: batchnorm-without-sync
    net(torch.randn(4, 8)).sum().backward()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
