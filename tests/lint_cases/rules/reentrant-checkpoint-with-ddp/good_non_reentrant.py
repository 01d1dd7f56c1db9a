import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint


class Net(torch.nn.Module):
    def __init__(self, reentrant=False):
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 1)
        self.reentrant = reentrant
        self.options = {"use_reentrant": False}

    def forward(self, x):
        h = checkpoint(self.a, x, use_reentrant=False)
        h = checkpoint(torch.relu, h, use_reentrant=self.reentrant)  # the caller's choice
        h = checkpoint(torch.tanh, h, **self.options)
        return self.b(h)


def main():
    dist.init_process_group("gloo")
    net = Net()
    net.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    net.gradient_checkpointing_enable(use_reentrant=False)  # a framework's own signature
    model = DDP(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        optimizer.zero_grad()
        model(torch.randn(4, 8)).sum().backward()
        optimizer.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
