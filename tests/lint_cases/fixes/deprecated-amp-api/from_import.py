import torch
from torch.cuda.amp import GradScaler, autocast as amp_autocast  # old names


def step(model, x, use_amp):
    scaler = GradScaler(enabled=use_amp)
    with amp_autocast(
        enabled=use_amp,  # on or off
    ):
        loss = model(x).sum()
    scaler.scale(loss).backward()
    return scaler
