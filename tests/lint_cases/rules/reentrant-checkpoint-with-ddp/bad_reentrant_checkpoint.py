import torch
import torch.distributed as dist
import torch.utils.checkpoint as cp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 1)

    def forward(self, x):
        h = checkpoint(self.a, x)  # expect: reentrant-checkpoint-with-ddp
        h = cp.checkpoint(torch.relu, h, use_reentrant=True)  # expect: reentrant-checkpoint-with-ddp
        return self.b(h)


def main():
    dist.init_process_group("gloo")
    net = Net()
    net.gradient_checkpointing_enable()  # expect: reentrant-checkpoint-with-ddp
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
