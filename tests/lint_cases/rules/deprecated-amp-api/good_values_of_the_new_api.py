"""The new entry points taken as values, and the old one only as the fallback of a `try` that
imports the new one (older PyTorch)."""
import contextlib
import functools

import torch

fp16_autocast = functools.partial(torch.amp.autocast, "cuda", dtype=torch.float16)
make_scaler = functools.partial(torch.amp.GradScaler, "cuda")

try:
    from torch.amp import autocast as new_autocast
except ImportError:
    new_autocast = torch.cuda.amp.autocast


def context(enabled):
    maybe_autocast = fp16_autocast if enabled else contextlib.nullcontext
    return maybe_autocast()


def is_old(obj):
    return obj is new_autocast
