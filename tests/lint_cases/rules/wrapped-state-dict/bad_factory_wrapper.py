import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from helper_parallel import count_parameters, wrap_for_ranks


def local_wrap(model):
    return DDP(model)


def main():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    net = wrap_for_ranks(torch.nn.Linear(8, 1), rank)
    other = local_wrap(torch.nn.Linear(8, 1))
    print(count_parameters(net))
    if rank == 0:
        torch.save(net.state_dict(), "net.pt")  # expect: wrapped-state-dict
        torch.save(other.state_dict(), "other.pt")  # expect: wrapped-state-dict
        torch.save(net.module.state_dict(), "plain.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
