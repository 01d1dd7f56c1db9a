"""A Typer app whose command trains; the console script or `python -m` runs `app`."""
import os

import torch
import torch.distributed as dist
import typer

app = typer.Typer()


@app.command()
def fit(epochs: int = 1):
    local_rank = int(os.environ["LOCAL_RANK"])
    dist.init_process_group("nccl")  # expect: missing-set-device
    model = torch.nn.Linear(8, 8).cuda(local_rank)
    for _ in range(epochs):
        model(torch.randn(4, 8).cuda(local_rank)).sum().backward()
    dist.destroy_process_group()
