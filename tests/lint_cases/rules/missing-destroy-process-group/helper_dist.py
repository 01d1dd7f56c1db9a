"""Set-up helpers a training script imports (a library module: it owns no process group)."""
import os

import torch
import torch.distributed as dist


def _connect(backend):
    dist.init_process_group(backend=backend)


def setup_distributed(cfg):
    cfg.rank = int(os.environ.get("RANK", 0))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    _connect(cfg.backend)


def seed_everything(seed):
    torch.manual_seed(seed)
