import json

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def save_checkpoint(model, path):
    torch.save(model.module.state_dict(), path)  # expect: unguarded-rank-side-effect


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for epoch in range(3):
        loss = model(torch.randn(16, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"epoch {epoch} loss {loss.item():.4f}")  # expect: unguarded-rank-side-effect
        save_checkpoint(model, f"epoch{epoch}.pt")
    with open("metrics.json", "w") as f:  # expect: unguarded-rank-side-effect
        json.dump({"loss": loss.item()}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
