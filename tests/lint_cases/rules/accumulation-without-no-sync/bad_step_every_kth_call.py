"""A trainer whose `optimize` runs one micro-step per call and steps every k-th call."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, accumulation):
        self.model = DDP(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.accumulation = accumulation
        self.n_iter = 0

    def optimize(self, loss):
        loss = loss / self.accumulation
        loss.backward()  # expect: accumulation-without-no-sync
        self.n_iter += 1
        if self.n_iter % self.accumulation == 0:
            self.optimizer.step()
            self.optimizer.zero_grad()

    def fit(self, batches):
        for x, y in batches:
            self.optimize((self.model(x) - y).pow(2).mean())


if __name__ == "__main__":
    dist.init_process_group("gloo")
    Trainer(torch.nn.Linear(8, 1), 4).fit([(torch.randn(4, 8), torch.randn(4, 1))] * 8)
    dist.destroy_process_group()
