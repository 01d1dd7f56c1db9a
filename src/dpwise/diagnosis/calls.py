"""Record every module call of one forward: digests of its inputs and outputs, and its own draws.

A module "draws" when a global random generator advances while its own code runs (not while one
of its sub-modules runs): that names the innermost module that asked for random numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import torch
from torch import nn

from dpwise.diagnosis.rng import Generators

Digest = tuple[tuple[Any, ...], ...]


def _tensors(value: Any) -> list[torch.Tensor]:
    """Every tensor in a nested value: tuples, lists, dicts, ModelOutput-like mappings."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict) or hasattr(value, "items"):
        try:
            return [t for v in value.values() for t in _tensors(v)]
        except Exception:  # a mapping-like object that refuses; nothing to compare
            return []
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


@lru_cache(maxsize=64)
def _ramp(n: int, dtype: torch.dtype) -> torch.Tensor:
    """Fixed weights (no random generator involved) that make the digest see element order."""
    return torch.arange(n, dtype=torch.float64).mul_(0.618).cos_().to(dtype)


def release_weights() -> None:
    """Free the cached digest weights (one tensor per activation size seen)."""
    _ramp.cache_clear()


def digest(value: Any) -> Digest:
    """Shape, sum, L2 norm and a position-weighted sum of each tensor (accumulated in float64)."""
    out: list[tuple[Any, ...]] = []
    with torch.no_grad():
        for t in _tensors(value):
            if t.device.type == "meta" or t.numel() == 0:
                out.append((tuple(t.shape),))
                continue
            d = t.detach().reshape(-1)
            if d.is_complex():
                d = torch.view_as_real(d).reshape(-1)
            elif not d.is_floating_point():
                d = d.double()
            sums = (
                d.sum(dtype=torch.float64),
                torch.linalg.vector_norm(d, dtype=torch.float64),
                d.mul(_ramp(d.numel(), d.dtype)).sum(dtype=torch.float64),
            )
            out.append((tuple(t.shape), *(s.item() for s in sums)))
    return tuple(out)


def same(a: Digest, b: Digest, rel: float = 1e-7) -> bool:
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if len(x) != len(y) or x[0] != y[0]:
            return False
        pairs = zip(x[1:], y[1:], strict=True)
        if any(not math.isclose(u, v, rel_tol=rel, abs_tol=rel) for u, v in pairs):
            return False
    return True


@dataclass
class Call:
    name: str
    occurrence: int  # this module's n-th call in the forward
    inputs: Digest
    output: Digest = ()
    drew: bool = False
    end: int = 0  # calls[start + 1 : end] ran inside this one
    last: Generators | None = field(default=None, repr=False)

    @property
    def key(self) -> tuple[str, int]:
        return self.name, self.occurrence


class CallRecorder:
    """Hooks on every module of ``model`` while the ``with`` block runs."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.calls: list[Call] = []
        self._stack: list[Call] = []
        self._seen: dict[str, int] = {}
        self._handles: list[Any] = []

    def __enter__(self) -> CallRecorder:
        for name, module in self.model.named_modules():
            pre = module.register_forward_pre_hook(self._pre(name), with_kwargs=True)
            post = module.register_forward_hook(self._post(), with_kwargs=True)
            self._handles += [pre, post]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    def _pre(self, name: str):
        def hook(module: nn.Module, args: Any, kwargs: Any) -> None:
            now = Generators()
            outer = self._stack[-1] if self._stack else None  # its `last` is set while it runs
            if outer is not None and outer.last is not None and now.moved_since(outer.last):
                outer.drew = True
            occurrence = self._seen.get(name, 0)
            self._seen[name] = occurrence + 1
            call = Call(name, occurrence, digest((args, kwargs)), last=now)
            self.calls.append(call)
            self._stack.append(call)

        return hook

    def _post(self):
        def hook(module: nn.Module, args: Any, kwargs: Any, output: Any) -> None:
            call = self._stack.pop()
            now = Generators()
            call.drew = call.drew or (call.last is not None and now.moved_since(call.last))
            call.output = digest(output)
            call.end = len(self.calls)
            call.last = None
            if self._stack:
                self._stack[-1].last = now

        return hook
