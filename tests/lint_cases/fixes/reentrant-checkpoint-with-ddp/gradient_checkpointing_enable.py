import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def wrap(model):
    model.gradient_checkpointing_enable()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={
        "preserve_rng_state": True,  # keep dropout masks
    })
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=dict(use_reentrant=True))
    return DDP(model)
