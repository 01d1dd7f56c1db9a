"""Evaluation on rank 0 only, which gathers its metric from every rank
(huggingface/transformers#31532): rank 0 waits in the gather while rank 1 trains on."""

import torch
import torch.distributed as dist
from common import train


def evaluate():
    metric = torch.tensor([1.0])
    gathered = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, metric)
    return sum(gathered)


dist.init_process_group("gloo")
train()
if dist.get_rank() == 0:
    evaluate()
train()
