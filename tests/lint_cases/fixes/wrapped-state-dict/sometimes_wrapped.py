import torch
from torch.nn.parallel import DistributedDataParallel as DDP


def train(model, distributed):
    if distributed:
        model = DDP(model)
    for epoch in range(2):
        pass
    torch.save(model.state_dict(), "model.pt")
