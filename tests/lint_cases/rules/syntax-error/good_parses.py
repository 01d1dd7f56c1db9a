import torch

for epoch in range(10):
    print(torch.tensor(epoch))
