"""The DDP tutorial series' Trainer: `self.gpu_id` is the local rank."""
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Trainer:
    def __init__(self, model, optimizer, save_every):
        self.gpu_id = int(os.environ["LOCAL_RANK"])
        self.model = DDP(model.to(self.gpu_id), device_ids=[self.gpu_id])
        self.optimizer = optimizer
        self.save_every = save_every

    def _save_snapshot(self, epoch):
        torch.save({"MODEL_STATE": self.model.module.state_dict(), "EPOCHS_RUN": epoch}, "snap.pt")
        print(f"Epoch {epoch} | Training snapshot saved at snap.pt")

    def train(self, max_epochs):
        for epoch in range(max_epochs):
            loss = self.model(torch.randn(4, 20).to(self.gpu_id)).sum()
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
            if self.gpu_id == 0 and epoch % self.save_every == 0:
                self._save_snapshot(epoch)


def main():
    dist.init_process_group("nccl")
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    model = torch.nn.Linear(20, 1)
    Trainer(model, torch.optim.SGD(model.parameters(), lr=1e-3), save_every=2).train(10)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
