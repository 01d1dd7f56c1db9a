import torch

for epoch in range(10)  # expect: syntax-error
    print(epoch)
