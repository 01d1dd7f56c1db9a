import torch.distributed as dist


def step():
    dist.init_process_group("gloo")
