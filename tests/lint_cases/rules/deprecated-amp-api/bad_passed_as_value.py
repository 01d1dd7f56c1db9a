"""The deprecated entry points taken as values, to be called later: a partial, an alias, one side
of a conditional. Each call through them warns as the direct call does."""
import contextlib
import functools
from functools import partial

import torch
from torch.cuda import amp

fp16_autocast = functools.partial(torch.cuda.amp.autocast, dtype=torch.float16)  # expect: deprecated-amp-api
bf16_autocast = partial(amp.autocast, dtype=torch.bfloat16)  # expect: deprecated-amp-api
make_scaler = torch.cuda.amp.GradScaler  # expect: deprecated-amp-api


def context(enabled):
    maybe_autocast = torch.cuda.amp.autocast if enabled else contextlib.nullcontext  # expect: deprecated-amp-api
    return maybe_autocast()


def step(model, x):
    with fp16_autocast():
        loss = model(x).sum()
    make_scaler().scale(loss).backward()
