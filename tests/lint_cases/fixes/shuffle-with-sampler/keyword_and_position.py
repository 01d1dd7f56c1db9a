import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

data = TensorDataset(torch.arange(16.0))
loader = DataLoader(
    data,
    batch_size=4,  # per process
    shuffle=True,  # goes with the argument
    sampler=DistributedSampler(data, num_replicas=2, rank=0),
)
short = DataLoader(data, batch_size=4, sampler=DistributedSampler(data, num_replicas=2, rank=0), shuffle=True)
positional = DataLoader(data, 4, True, DistributedSampler(data, num_replicas=2, rank=0))
