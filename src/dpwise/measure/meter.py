"""What a user's script does at each optimizer step, measured inside the rank without editing it
(torch's global hooks): when the step ended, how many rows entered the model since the step
before, a digest of those rows (two ranks that trained the same rows have the same digests), and
a fingerprint of the set of rows that does not depend on how they were split: the sum of one hash
per row, so the ranks' fingerprints of a step add up to the one a single process has when it
trains the same global batch (a data order that is not the sampler's shows as another sum).

Rows are counted at the outermost module call of the thread that steps the optimizer (a
DataParallel wrapper's whole batch, not each replica's share): the first dimension of its first
tensor argument, positional or keyword (`model(x)`, `model(input_ids=…)`); a module without
parameters (a loss) is not a model. A digest reads a few
values of each batch, never the whole of it. Until the first step every module call passes
through two global hooks; from then on only the modules found outermost are hooked, so a step
of a deep model costs one hook call per model call and a hash of at most DIGEST_VALUES numbers.
"""

from __future__ import annotations

import hashlib
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

DIGEST_VALUES = 64  # values of a batch read for its digest, spread over the batch
ROW_VALUES = 16  # values of each row read for its hash, spread over the row
MASK = (1 << 64) - 1  # row sets add up modulo 2**64
# Odd multipliers, one per value read from a row, and the mixer's (splitmix64's): a row's hash
# depends on every value read and on their places in the row.
_WEIGHTS = np.random.default_rng(20261203).integers(1, 2**63, ROW_VALUES, dtype=np.uint64) | 1
_MIX = np.uint64(0xBF58476D1CE4E5B9)


@dataclass
class StepRecord:
    """Every optimizer step of one rank: when it ended (perf_counter seconds), the rows that
    entered the model since the step before, their digest ("" where they were not read), and
    the fingerprint of each read step's rows as a set (the sum of the rows' hashes modulo 2**64:
    see rowset; the read steps come first)."""

    ends: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    rowsets: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ends": self.ends, "rows": self.rows, "digests": self.digests,
                "rowsets": self.rowsets}  # fmt: skip


class Meter:
    """Counts the rows of each step's model calls; ``step()`` closes a step. The rows of the
    first ``read`` steps (every step's where None) are also read for their digest and row set:
    compare reads them in the untimed steps, so the steps it times only count rows (reading a
    batch costs a step of a small model some percent)."""

    def __init__(self, read: int | None = None) -> None:
        self.read = read
        self.record = StepRecord()
        self._local = threading.local()
        self._stepping = threading.main_thread()
        self._rows = 0
        self._hash = hashlib.blake2b(digest_size=8)
        self._rowset = 0
        self._handles: list[Any] = []
        self._outermost: dict[int, weakref.ref[torch.nn.Module]] = {}
        self._narrowed = False

    def install(self) -> Meter:
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )

        self._handles = [
            register_module_forward_pre_hook(self._enter),
            register_module_forward_hook(self._leave, with_kwargs=True, always_call=True),
        ]
        return self

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def step(self, stepping: threading.Thread | None = None) -> None:
        """Close the step that just ended (called from the optimizer's step hook)."""
        self._stepping = stepping or threading.current_thread()
        read = self._reading()
        self.record.ends.append(time.perf_counter())
        self.record.rows.append(self._rows)
        self.record.digests.append(self._hash.hexdigest() if self._rows and read else "")
        if read:
            self.record.rowsets.append(self._rowset)
        self._rows = 0
        self._hash = hashlib.blake2b(digest_size=8)
        self._rowset = 0
        if not self._narrowed and self._outermost:
            self._narrow()

    def _reading(self) -> bool:
        """Whether the step under way is one whose rows are read."""
        return self.read is None or len(self.record.ends) < self.read

    def _narrow(self) -> None:
        """From the global hooks to a hook on each module found outermost."""
        self.remove()
        for ref in self._outermost.values():
            module = ref()
            if module is not None:
                handle = module.register_forward_hook(self._top, with_kwargs=True, always_call=True)
                self._handles.append(handle)
        self._narrowed = True

    def _top(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        if threading.current_thread() is self._stepping:
            self._count(args, kwargs)

    def _enter(self, module: torch.nn.Module, args: Any) -> None:
        self._local.depth = getattr(self._local, "depth", 0) + 1

    def _leave(self, module: torch.nn.Module, args: Any, kwargs: Any, output: Any) -> None:
        depth = getattr(self._local, "depth", 1) - 1
        self._local.depth = depth
        if depth or threading.current_thread() is not self._stepping or not _has_weights(module):
            return
        self._outermost.setdefault(id(module), weakref.ref(module))
        self._count(args, kwargs)

    def _count(self, args: Any, kwargs: Any) -> None:
        batch = first_tensor((*args, *kwargs.values()))
        if batch is None or batch.dim() == 0:
            return
        self._rows += batch.shape[0]
        if self._reading():
            self._hash.update(sample_bytes(batch))
            self._rowset = (self._rowset + rowset(batch)) & MASK


def _has_weights(module: torch.nn.Module) -> bool:
    """A model, not a loss or a function wrapped as a module (`criterion(out, y)` is called at
    the top level too, with the model's output as its first tensor)."""
    return next(module.parameters(), None) is not None


def first_tensor(values: Iterable[Any]) -> torch.Tensor | None:
    """The first tensor among ``values``, looking one level into lists, tuples and dicts (a
    batch passed as `model(batch)` where batch is a dict of tensors)."""
    for value in values:
        if isinstance(value, torch.Tensor):
            return value
        inner: Iterable[Any] = ()
        if isinstance(value, dict):
            inner = value.values()
        elif isinstance(value, list | tuple):
            inner = value
        for item in inner:
            if isinstance(item, torch.Tensor):
                return item
    return None


def sample_bytes(batch: torch.Tensor) -> bytes:
    """A few values of ``batch``, spread evenly over it, with its shape: what a digest reads."""
    flat = batch.detach().reshape(-1)
    stride = max(1, flat.numel() // DIGEST_VALUES)
    values = flat[::stride][:DIGEST_VALUES].to("cpu", torch.float64)
    return repr(tuple(batch.shape)).encode() + values.numpy().tobytes()


def rowset(batch: torch.Tensor) -> int:
    """The fingerprint of ``batch``'s rows as a set: the sum of a hash of each row (ROW_VALUES of
    its values, spread over it) modulo 2**64. It does not depend on the rows' order or on how
    they were split between calls or ranks: the two halves' fingerprints add up to the whole's."""
    rows = batch.detach()
    rows = rows.flatten(1) if rows.dim() > 1 else rows.unsqueeze(1)
    stride = max(1, rows.shape[1] // ROW_VALUES)
    values = rows[:, ::stride][:, :ROW_VALUES].to("cpu", torch.float64).numpy()
    bits = np.ascontiguousarray(values).view(np.uint64)
    hashed = (bits * _WEIGHTS[: bits.shape[1]]).sum(axis=1, dtype=np.uint64)
    hashed ^= hashed >> np.uint64(31)
    hashed *= _MIX
    hashed ^= hashed >> np.uint64(29)
    return int(hashed.sum(dtype=np.uint64))
