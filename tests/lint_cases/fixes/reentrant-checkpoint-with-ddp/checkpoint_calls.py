import torch
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

block = torch.nn.Linear(4, 4)
model = DDP(torch.nn.Sequential(block))


def forward(x):
    x = checkpoint(block, x)  # saves memory
    x = checkpoint(
        block,
        x,  # the activations
    )
    return checkpoint(block, x, use_reentrant=True)
