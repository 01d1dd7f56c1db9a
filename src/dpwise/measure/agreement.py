"""How far one trained state is from another (a run's from single's): parameters and buffers
apart, each against a tolerance that follows its dtype, and the trainable parameters that no run
changed at all.

Parameters decide the convergence check. Buffers are reported beside them: a buffer the forward
updates from the rows it sees (a running mean, a step counter, an EMA) ends as rank 0's under DDP
(``broadcast_buffers``), so it may differ while every parameter agrees.

Tolerance: ``--tolerance`` is absolute and meant for fp32 and fp64. A tensor held in a 16-bit
float type cannot agree closer than its own rounding: there the tolerance is at least ``ULPS``
units in the last place at the tensor's largest magnitude (bf16 at 0.1: 2 × 2⁻¹¹).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

ULPS = 2  # units in the last place a 16-bit float tensor may differ by
WIDE = (torch.float32, torch.float64)  # dtypes the absolute tolerance is meant for


def dtype_name(dtype: torch.dtype) -> str:
    return {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}.get(
        dtype, str(dtype).removeprefix("torch.")
    )


def allowed(reference: torch.Tensor, tolerance: float) -> float:
    """The largest difference from ``reference`` that passes, for its dtype."""
    if reference.dtype in WIDE or not reference.is_floating_point() or reference.numel() == 0:
        return tolerance
    largest = reference.detach().abs().max().double().item()
    return max(tolerance, ULPS * torch.finfo(reference.dtype).eps * largest)


@dataclass(frozen=True)
class Gap:
    """The largest difference over some tensors, and where it is."""

    max: float = 0.0
    name: str | None = None  # the tensor with the largest difference
    beyond: tuple[str, ...] = ()  # tensors beyond their tolerance, in the state's order
    dtypes: tuple[str, ...] = ()  # the floating dtypes compared (bf16, fp32 …)

    @property
    def within(self) -> bool:
        return not self.beyond

    def to_json(self) -> dict[str, Any]:
        return {
            "max": self.max,
            "name": self.name,
            "beyond_tolerance": list(self.beyond),
            "dtypes": list(self.dtypes),
        }


def gap(
    reference: Mapping[str, torch.Tensor],
    other: Mapping[str, torch.Tensor],
    names: Iterable[str],
    tolerance: float,
) -> Gap:
    """The difference of ``other`` from ``reference`` over the floating tensors ``names``."""
    worst, where, beyond, dtypes = 0.0, None, [], []
    for name in names:
        a, b = reference.get(name), other.get(name)
        if a is None or b is None or not a.is_floating_point() or a.shape != b.shape:
            continue
        diff = (a.double() - b.double()).abs().max().item() if a.numel() else 0.0
        if diff != diff:  # NaN: the worst there is
            diff = float("inf")
        if dtype_name(a.dtype) not in dtypes:
            dtypes.append(dtype_name(a.dtype))
        if where is None or diff > worst:
            worst, where = diff, name
        if diff > allowed(a, tolerance):
            beyond.append(name)
    return Gap(worst, where, tuple(beyond), tuple(dtypes))


@dataclass(frozen=True)
class Kinds:
    """Which state-dict names of the model are parameters (trainable or frozen) and buffers."""

    parameters: tuple[str, ...] = ()  # every name, a tied parameter's under each of them
    trainable: tuple[str, ...] = ()  # each trainable parameter once, under its first name
    buffers: tuple[str, ...] = ()
    sizes: Mapping[str, int] = field(default_factory=dict)  # elements per parameter name

    @classmethod
    def of(cls, model: nn.Module) -> Kinds:
        """From a model (the meta-device one will do): every name a state dict may use, tied
        parameters under each of their names."""
        named = list(model.named_parameters(remove_duplicate=False))
        return cls(
            parameters=tuple(n for n, _ in named),
            trainable=tuple(n for n, p in model.named_parameters() if p.requires_grad),
            buffers=tuple(n for n, _ in model.named_buffers(remove_duplicate=False)),
            sizes={n: p.numel() for n, p in named},
        )

    def split(self, state: Mapping[str, torch.Tensor]) -> tuple[list[str], list[str]]:
        """The state's names: parameters, then everything else (buffers, extra state)."""
        params = set(self.parameters)
        return [n for n in state if n in params], [n for n in state if n not in params]


@dataclass(frozen=True)
class Untrained:
    """Trainable parameters that ended where they started in every run."""

    names: tuple[str, ...] = ()
    elements: int = 0  # their elements
    trainable_elements: int = 0  # elements of all trainable parameters

    def __bool__(self) -> bool:
        return bool(self.names)

    def to_json(self) -> dict[str, Any]:
        return {
            "parameters": list(self.names),
            "elements": self.elements,
            "trainable_elements": self.trainable_elements,
        }


def untrained(
    kinds: Kinds, initial: Mapping[str, torch.Tensor], finals: Iterable[Mapping[str, torch.Tensor]]
) -> Untrained:
    """The trainable parameters equal to ``initial`` in every final state (each tied parameter
    once, under its first name)."""
    finals = list(finals)
    names = [
        n
        for n in kinds.trainable
        if n in initial
        and all(n in f and torch.equal(f[n].to(initial[n].dtype), initial[n]) for f in finals)
    ]
    size = kinds.sizes.get
    return Untrained(
        tuple(names), sum(size(n, 0) for n in names), sum(size(n, 0) for n in kinds.trainable)
    )
