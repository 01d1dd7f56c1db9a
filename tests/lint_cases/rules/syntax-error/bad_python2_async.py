import torch

x = torch.randn(4, 8)
x = x.cuda(async=True)  # expect: syntax-error
