"""Mixed precision: autocast for bf16/fp16, one GradScaler per process for fp16."""

from __future__ import annotations

import functools
import warnings
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import torch

from dpwise.errors import DpwiseError

_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


@functools.cache
def cpu_autocasts_fp16() -> bool:
    """Whether this PyTorch's CPU autocast really computes in float16 (older releases did not)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with torch.autocast("cpu", dtype=torch.float16):
            out = torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    return out.dtype == torch.float16


class Precision:
    def __init__(self, name: str, device_type: str) -> None:
        if name == "fp16" and device_type == "cpu" and not cpu_autocasts_fp16():
            raise DpwiseError(
                f"--precision fp16: PyTorch {torch.__version__} cannot autocast to float16 on the "
                "CPU; use --precision bf16 on the CPU"
            )
        self.name = name
        self.device_type = device_type
        self.dtype = _DTYPES[name]
        # Created once per process, never inside the loop.
        self.scaler = torch.amp.GradScaler(device_type) if name == "fp16" else None

    def autocast(self) -> AbstractContextManager[Any]:
        if self.dtype is None:
            return nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)

    def backward(self, loss: torch.Tensor) -> None:
        if self.scaler is None:
            loss.backward()
        else:
            self.scaler.scale(loss).backward()

    def step(self, optimizer: torch.optim.Optimizer) -> None:
        if self.scaler is None:
            optimizer.step()
        else:
            self.scaler.step(optimizer)
            self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
