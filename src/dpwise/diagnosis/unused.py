"""Parameters that get no gradient: what makes DDP stop with "Expected to have finished reduction".

DDP's reducer waits for a gradient of every trainable parameter in every step. A parameter the
loss does not reach (a skipped block, an unchosen expert, a dead branch) never reports, and the
next step's forward raises. The modules are named by the parameters that went without gradient.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torch import nn

from dpwise.diagnosis.layers import Layer, group


@dataclass(frozen=True)
class Unused:
    """Modules whose parameters went without gradient in every probe pass, or in only some."""

    always: list[Layer] = field(default_factory=list)
    sometimes: list[Layer] = field(default_factory=list)
    passes: int = 0

    def __bool__(self) -> bool:
        return bool(self.always or self.sometimes)

    def describe(self) -> str:
        parts = []
        if self.sometimes:
            parts.append(f"{group(self.sometimes)} (no gradient in some of {self.passes} passes)")
        if self.always:
            parts.append(f"{group(self.always)} (no gradient in any of {self.passes} passes)")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "passes": self.passes,
            "always": [layer.to_dict() for layer in self.always],
            "sometimes": [layer.to_dict() for layer in self.sometimes],
        }


def trainable(model: nn.Module) -> list[str]:
    """Names of the parameters DDP reduces, in its order (model.parameters(), requires_grad)."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def without_grad(model: nn.Module) -> set[str]:
    """Trainable parameters whose .grad is None after a backward pass."""
    return {n for n, p in model.named_parameters() if p.requires_grad and p.grad is None}


def owners(model: nn.Module, params: set[str]) -> list[Layer]:
    """The outermost modules all of whose trainable parameters are in ``params``.

    A parameter whose module still has other parameters in use is named on its own.
    """
    named: list[Layer] = []
    covered: set[str] = set()
    for name, module in model.named_modules():
        prefix = f"{name}." if name else ""
        mine = {prefix + n for n, p in module.named_parameters() if p.requires_grad}
        if not mine or not mine <= params or mine <= covered:
            continue
        named.append(Layer(name, type(module).__name__))
        covered |= mine
    named += [Layer(p, "parameter") for p in trainable(model) if p in params - covered]
    return named


def classify(model: nn.Module, per_pass: list[set[str]]) -> Unused:
    """Split the parameters unused in the probe passes into 'every pass' and 'some passes'."""
    if not per_pass:
        return Unused()
    always = set.intersection(*per_pass)
    some = set.union(*per_pass) - always
    return Unused(owners(model, always), owners(model, some), len(per_pass))


REDUCTION_ERROR = "Expected to have finished reduction in the prior iteration"


def unused_from_error(model: nn.Module, message: str) -> list[Layer]:
    """The modules of the parameter indices DDP's error lists ("did not receive grad ...: 2 3")."""
    found = re.search(r"did not receive grad for rank \d+:\s*([\d ]+)", message)
    if not found:
        return []
    names = trainable(model)
    picked = {names[int(i)] for i in found.group(1).split() if int(i) < len(names)}
    return owners(model, picked)
