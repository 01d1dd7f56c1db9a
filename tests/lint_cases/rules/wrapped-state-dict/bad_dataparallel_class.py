import torch
from torch import nn


class Trainer:
    def __init__(self, net):
        self.model = nn.DataParallel(net)  # expect: data-parallel-usage

    def checkpoint(self):
        return self.model.state_dict()  # expect: wrapped-state-dict

    def save(self, path):
        torch.save(self.checkpoint(), path)
