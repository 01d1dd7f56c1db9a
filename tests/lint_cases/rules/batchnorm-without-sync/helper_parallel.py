"""Model helpers a training script imports."""
from torch.nn.parallel import DistributedDataParallel as DDP


def wrap_for_ranks(model, rank):
    return DDP(model, device_ids=[rank])
