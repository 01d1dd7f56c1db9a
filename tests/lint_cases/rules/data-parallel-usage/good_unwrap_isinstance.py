"""Helpers that recognise a DataParallel wrapper without building one."""
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def unwrap(model: nn.Module) -> nn.Module:
    if isinstance(model, (nn.DataParallel, DDP)):
        return model.module
    return model


def describe(model: nn.Module) -> str:
    return "DataParallel" if type(model) is nn.DataParallel else type(model).__name__
