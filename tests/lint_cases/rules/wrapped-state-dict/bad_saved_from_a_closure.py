"""A DDP model saved from a closure defined inside main: the closure sees main's wrapper."""
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main():
    dist.init_process_group("gloo")
    model = DDP(torch.nn.Linear(2, 2))

    def save_checkpoint(epoch):
        if dist.get_rank() == 0:
            torch.save(model.state_dict(), f"ckpt_{epoch}.pt")  # expect: wrapped-state-dict

    for epoch in range(3):
        model(torch.randn(1, 2)).sum().backward()
        save_checkpoint(epoch)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
