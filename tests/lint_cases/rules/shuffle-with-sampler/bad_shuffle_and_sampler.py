import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.randn(100, 4))
sampler = DistributedSampler(dataset, num_replicas=2, rank=0)
loader = DataLoader(
    dataset,
    batch_size=8,
    shuffle=True,  # expect: shuffle-with-sampler
    sampler=sampler,
)
positional = DataLoader(dataset, 8, True, sampler)  # expect: shuffle-with-sampler
