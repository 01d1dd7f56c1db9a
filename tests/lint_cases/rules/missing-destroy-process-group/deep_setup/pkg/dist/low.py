import torch.distributed as dist


def start(rank):
    dist.init_process_group("gloo", rank=rank)
