"""Model helpers a training script imports."""
from torch.nn.parallel import DistributedDataParallel as DDP


def wrap_for_ranks(model, rank):
    wrapped = DDP(model, device_ids=[rank])
    return wrapped


def count_parameters(model):
    return sum(p.numel() for p in model.parameters())
