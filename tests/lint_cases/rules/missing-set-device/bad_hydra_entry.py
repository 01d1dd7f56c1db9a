"""A Hydra app: `@hydra.main` is the entry point, no `__main__` block is needed to run it."""
import os

import hydra
import torch
import torch.distributed as dist


@hydra.main(config_path="conf", config_name="train", version_base=None)
def train(cfg):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group(backend="nccl")  # expect: missing-set-device
    model = torch.nn.Linear(8, 8).to(f"cuda:{local_rank}")
    model(torch.randn(4, 8, device=f"cuda:{local_rank}")).sum().backward()
    dist.destroy_process_group()
