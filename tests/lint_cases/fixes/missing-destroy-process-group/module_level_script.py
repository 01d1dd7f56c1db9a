import torch

torch.distributed.init_process_group("gloo")
model = torch.nn.Linear(2, 2)
for step in range(3):
    model(torch.ones(1, 2)).sum().backward()
print("trained")
