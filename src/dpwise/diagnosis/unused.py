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
    """Modules whose parameters went without gradient in every probe pass, or in only some.

    ``sometimes`` holds both kinds of "some": ``batches`` are those whose use follows the rows
    (a head picked by the batch's content: the same rows always give the same answer, other
    rows another), the rest varied with the seed on the same rows (random depth, routing).
    """

    always: list[Layer] = field(default_factory=list)
    sometimes: list[Layer] = field(default_factory=list)
    passes: int = 0
    batches: list[Layer] = field(default_factory=list)
    batch_count: int = 0  # different batches the passes ran on

    def __bool__(self) -> bool:
        return bool(self.always or self.sometimes)

    @property
    def by_seed(self) -> list[Layer]:
        return [layer for layer in self.sometimes if layer not in self.batches]

    def describe(self) -> str:
        parts = []
        if self.batches:
            parts.append(
                f"{group(self.batches)} (used on some batches only: no gradient on some of "
                f"{self.batch_count} different batches, a gradient on others)"
            )
        if self.by_seed:
            parts.append(f"{group(self.by_seed)} (no gradient in some of {self.passes} passes)")
        if self.always:
            on = f" on {self.batch_count} different batches" if self.batch_count > 1 else ""
            parts.append(f"{group(self.always)} (no gradient in any of {self.passes} passes{on})")
        return "; ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return {
            "passes": self.passes,
            "batches": self.batch_count,
            "always": [layer.to_dict() for layer in self.always],
            "sometimes": [layer.to_dict() for layer in self.sometimes],
            "some_batches": [layer.to_dict() for layer in self.batches],
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


def classify(
    model: nn.Module, per_pass: list[set[str]], per_batch: list[set[str]] | None = None
) -> Unused:
    """Split the parameters unused in the probe passes into 'every pass' and 'some passes'.

    ``per_pass``: passes on the same rows under different seeds; ``per_batch``: passes on other
    rows (one seed). A parameter whose use is the same under every seed but not on every batch
    is used on some batches only.
    """
    if not per_pass:
        return Unused()
    every = per_pass + list(per_batch or [])
    always = every[0].intersection(*every[1:])
    some = every[0].union(*every[1:]) - always
    by_seed = per_pass[0].union(*per_pass[1:]) - per_pass[0].intersection(*per_pass[1:])
    batches = owners(model, some - by_seed) if per_batch else []
    return Unused(
        owners(model, always),
        owners(model, some),
        len(every),
        batches,
        1 + len(per_batch or []),
    )


REDUCTION_ERROR = "Expected to have finished reduction in the prior iteration"


def unused_from_error(model: nn.Module, message: str) -> list[Layer]:
    """The modules of the parameter indices DDP's error lists ("did not receive grad ...: 2 3")."""
    found = re.search(r"did not receive grad for rank \d+:\s*([\d ]+)", message)
    if not found:
        return []
    names = trainable(model)
    picked = {names[int(i)] for i in found.group(1).split() if int(i) < len(names)}
    return owners(model, picked)
