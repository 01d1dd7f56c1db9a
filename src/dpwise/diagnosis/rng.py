"""The process's global random generators: seed them all, and tell whether any of them advanced."""

from __future__ import annotations

import random
import sys
from typing import Any

import torch


def seed_all(seed: int) -> None:
    """Seed torch's CPU generator, Python's random and (when imported) NumPy's legacy generator."""
    torch.manual_seed(seed)
    random.seed(seed)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        numpy.random.seed(seed)


class Generators:
    """A snapshot of every global generator; ``moved_since`` says whether one drew a number."""

    def __init__(self) -> None:
        self.torch = torch.get_rng_state()
        self.python = random.getstate()
        self.numpy = _numpy_position()

    def moved_since(self, earlier: Generators) -> bool:
        return (
            self.numpy != earlier.numpy
            or self.python != earlier.python
            or not torch.equal(self.torch, earlier.torch)
        )


def _numpy_position() -> Any:
    numpy = sys.modules.get("numpy")
    if numpy is None:
        return None
    _, keys, pos, *_ = numpy.random.get_state(legacy=True)
    return pos, keys.tobytes()


class Saved:
    """Restore every global generator on exit: probing must not change what training draws."""

    def __enter__(self) -> Saved:
        self.torch = torch.get_rng_state()
        self.python = random.getstate()
        numpy = sys.modules.get("numpy")
        self.numpy = None if numpy is None else numpy.random.get_state()
        return self

    def __exit__(self, *exc: object) -> None:
        torch.set_rng_state(self.torch)
        random.setstate(self.python)
        numpy = sys.modules.get("numpy")
        if numpy is not None and self.numpy is not None:
            numpy.random.set_state(self.numpy)
