"""The new API first; the deprecated one only where this PyTorch lacks it."""
import torch


def make_amp():
    try:
        scaler = torch.amp.GradScaler("cuda")
        autocast = torch.amp.autocast("cuda", dtype=torch.float16)
    except (AttributeError, TypeError):
        scaler = torch.cuda.amp.GradScaler()
        autocast = torch.cuda.amp.autocast(dtype=torch.float16)
    return scaler, autocast
