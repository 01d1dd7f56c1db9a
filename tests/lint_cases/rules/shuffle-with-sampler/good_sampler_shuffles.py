import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

dataset = TensorDataset(torch.randn(100, 4))
sampler = DistributedSampler(dataset, num_replicas=2, rank=0, shuffle=True)
loader = DataLoader(dataset, batch_size=8, sampler=sampler)
either = DataLoader(dataset, batch_size=8, shuffle=(sampler is None), sampler=sampler)
plain = DataLoader(dataset, batch_size=8, shuffle=True, sampler=None)
