"""A small Trainer class: `self.is_main` guards every write."""
from __future__ import annotations

import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


class Trainer:
    def __init__(self, model: nn.Module, out: Path, local_rank: int) -> None:
        self.local_rank = local_rank
        self.device = torch.device("cuda", local_rank)
        self.model = DDP(model.to(self.device), device_ids=[local_rank])
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.out = out

    @property
    def is_main(self) -> bool:
        return dist.get_rank() == 0

    def fit(self, dataset, epochs: int) -> None:
        sampler = DistributedSampler(dataset)
        loader = DataLoader(dataset, batch_size=64, sampler=sampler)
        for epoch in range(epochs):
            sampler.set_epoch(epoch)
            for x, y in loader:
                loss = nn.functional.mse_loss(self.model(x.to(self.device)), y.to(self.device))
                self.optimizer.zero_grad()
                loss.backward()
                self.optimizer.step()
            if self.is_main:
                print(f"epoch {epoch} loss {loss.item():.4f}")
                self.save(epoch)

    def save(self, epoch: int) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        torch.save(self.model.module.state_dict(), self.out / f"epoch{epoch}.pt")


def main() -> None:
    dist.init_process_group("nccl")
    local_rank = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local_rank)
    trainer = Trainer(nn.Linear(32, 1), Path("runs"), local_rank)
    trainer.fit(TensorDataset(torch.randn(2048, 32), torch.randn(2048, 1)), epochs=3)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
