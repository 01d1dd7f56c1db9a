"""`optimize` steps on every call; the `if` only chooses how (scaled or not): no accumulation."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, fp16):
        self.model = DDP(model)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
        self.scaler = torch.amp.GradScaler("cuda", enabled=fp16)
        self.fp16 = fp16

    def optimize(self, loss):
        if self.fp16:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            loss.backward()
            self.optimizer.step()
        self.optimizer.zero_grad()

    def fit(self, batches):
        for x, y in batches:
            self.optimize((self.model(x) - y).pow(2).mean())


if __name__ == "__main__":
    dist.init_process_group("gloo")
    Trainer(torch.nn.Linear(8, 1), False).fit([(torch.randn(4, 8), torch.randn(4, 1))] * 8)
    dist.destroy_process_group()
