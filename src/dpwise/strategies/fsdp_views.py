"""FSDP2's view-tensor warning, said once with when it applies: FSDP2 warns once per unit and
step that a sharded unit returned a view, without saying whether that matters. While a sharded
model lives its warning is filtered out in a scope (the process's other warnings untouched), and
the note is said once per process, on the main one."""

from __future__ import annotations

import dataclasses
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

if TYPE_CHECKING:
    from torch.utils.hooks import RemovableHandle

VIEW_WARNING = r"FSDP2-wrapped module \(.*\) returned a view tensor"
"""FSDP2's warning (torch.distributed.fsdp's _fsdp_state), as a warnings filter matches it."""
VIEW_NOTE = (
    "dpwise: note: FSDP2 warns that a sharded unit ({units}) returns a view: an in-place op on "
    "that output before backward (x += y) would skip the unit's all-gather and give wrong "
    "gradients. It applies only if the model or loss changes the output in place; dpwise's loop "
    "does not. Whether gradients went wrong shows in the parameters: `dpwise compare "
    "--strategies single,fsdp` fails its convergence check if they did."
)
_NOTED: list[bool] = []  # VIEW_NOTE is said once per process


@contextmanager
def view_warning_hidden() -> Iterator[None]:
    """FSDP2 warns once per unit and step that a unit returned a view, without saying whether it
    matters: while a sharded model lives (wrap to release) that warning is filtered out, the
    process's other warnings untouched; note_views says it once, with when it applies."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=VIEW_WARNING, category=UserWarning)
        yield


def note_views(modules: list[nn.Module]) -> None:
    """Say VIEW_NOTE (once per process) when one of the sharded ``modules`` first returns a view
    that requires grad in a forward with grad enabled: the case FSDP2 warns of. The hooks go as
    soon as it is said."""
    if _NOTED:
        return
    handles: list[RemovableHandle] = []

    def seen(module: nn.Module, args: Any, output: Any) -> None:
        if not _NOTED and torch.is_grad_enabled() and _holds_view(output):
            _NOTED.append(True)
            print(VIEW_NOTE.format(units=type(module).__name__), file=sys.stderr)
        if _NOTED:
            for handle in handles:
                handle.remove()

    handles.extend(module.register_forward_hook(seen) for module in modules)


def _holds_view(output: Any) -> bool:
    """A tensor in ``output`` (itself, or within dicts, lists, tuples and dataclasses, as FSDP2
    looks) requires grad and is a view of another."""
    if isinstance(output, torch.Tensor):
        return output.requires_grad and output._base is not None
    if isinstance(output, dict):
        return any(_holds_view(v) for v in output.values())
    if isinstance(output, (list, tuple)):
        return any(_holds_view(v) for v in output)
    if dataclasses.is_dataclass(output) and not isinstance(output, type):
        return any(_holds_view(getattr(output, f.name)) for f in dataclasses.fields(output))
    return False
