"""Buffers the model updates in its forward: which, in which module, and whether the loss uses them.

A buffer that a forward changes (a running mean, a step counter, an EMA of the weights) follows the
rows it saw. Under DDP each process sees its own rows, and DDP broadcasts rank 0's buffers to the
others before every forward (``broadcast_buffers=True``, its default): the buffers end as rank 0's,
computed from rank 0's rows only, so they differ from the single process's. When the loss reads such
a buffer the parameters follow it and differ too; when nothing reads it only the buffer differs.

"Used" is tested, not guessed: the same forward (same weights, rows and seed) runs again with one
buffer moved; the buffer is used when the loss changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

MAX_TESTED = 8  # buffers whose use is tested (one forward each); the rest say "not tested"


@dataclass(frozen=True)
class MutatedBuffer:
    name: str  # the buffer's qualified name, as in the state dict
    module: str  # the qualified name of the module that holds it ("" is the model itself)
    kind: str  # that module's class name
    used: bool | None  # the loss changes when the buffer does; None where it was not tested

    @property
    def where(self) -> str:
        holder = f"{self.module} ({self.kind})" if self.module else f"the model ({self.kind})"
        return f"{self.name}, updated in the forward of {holder}"

    def describe(self) -> str:
        use = {True: "read by the loss", False: "not read by the loss", None: "use not tested"}
        return f"{self.where}, {use[self.used]}"

    def to_dict(self) -> dict[str, object]:
        return {"name": self.name, "module": self.module, "kind": self.kind, "used": self.used}


def snapshot(model: nn.Module) -> dict[str, torch.Tensor]:
    """A copy of every buffer, by qualified name."""
    return {n: b.detach().clone() for n, b in model.named_buffers()}


def changed(model: nn.Module, before: dict[str, torch.Tensor]) -> list[str]:
    """The buffers whose value differs from ``before`` (a snapshot), in the model's order."""
    out = []
    for name, buf in model.named_buffers():
        old = before.get(name)
        if old is None or old.shape != buf.shape or not torch.equal(old, buf.detach()):
            out.append(name)
    return out


def _moved(buf: torch.Tensor) -> torch.Tensor:
    """A clearly different value of the same dtype: +1 (and ×2 for floats, where +1 may round)."""
    if buf.dtype == torch.bool:
        return ~buf
    if buf.is_floating_point() or buf.is_complex():
        return buf * 2 + 1
    return buf + 1


def holder(model: nn.Module, name: str) -> tuple[str, str]:
    """The module that holds buffer ``name``: its qualified name and class."""
    module_name = name.rpartition(".")[0]
    module = model.get_submodule(module_name) if module_name else model
    return module_name, type(module).__name__


def classify(
    model: nn.Module,
    names: list[str],
    reset: Callable[[], None],
    loss_with: Callable[[], torch.Tensor],
) -> list[MutatedBuffer]:
    """Each buffer in ``names`` with whether the loss reads it: the model is ``reset()`` to its
    state before the forward, one buffer moved, and ``loss_with()`` (the same forward, rows and
    seed) compared with the unmoved loss. The model is left reset."""
    found = []
    with torch.no_grad():
        reset()
        base = loss_with().detach()
        for i, name in enumerate(names):
            used = None
            if i < MAX_TESTED:
                reset()
                buf = model.get_buffer(name)
                buf.copy_(_moved(buf))
                used = not torch.equal(loss_with().detach(), base)
            found.append(MutatedBuffer(name, *holder(model, name), used))
        reset()
    return found


def describe(buffers: list[MutatedBuffer]) -> str:
    return "; ".join(b.describe() for b in buffers)
