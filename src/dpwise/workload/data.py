"""Which rows each step trains on (DistributedSampler's rule) and how a batch is fetched."""

from __future__ import annotations

from typing import Any, Protocol

import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

from dpwise.errors import DpwiseError
from dpwise.workload import batches
from dpwise.workload.batches import Inputs


def epoch_permutation(n: int, seed: int, epoch: int) -> torch.Tensor:
    """One seeded permutation per epoch, as DistributedSampler(shuffle=True) draws it."""
    gen = torch.Generator().manual_seed(seed + epoch)
    return torch.randperm(n, generator=gen)


def micro_batch_rows(
    perm: torch.Tensor, step: int, micro: int, batch_size: int, accum_steps: int
) -> torch.Tensor:
    """Global rows of micro-step ``micro`` of optimizer step ``step``: one contiguous block of perm.

    Optimizer step k covers perm[k·G·K : (k+1)·G·K]; with accumulation it is cut into K blocks of G.
    """
    start = (step * accum_steps + micro) * batch_size
    return perm[start : start + batch_size]


class _Items(Protocol):
    """A map-style Dataset with a length (torch's Dataset class declares no __len__)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class BatchSource:
    """Random access to (inputs, targets) batches by row indices.

    Inputs are a tensor or a dict of tensors; targets a tensor, or None when the model computes
    its own loss from labels inside the inputs.
    """

    def __init__(self, data: Any, origin: str) -> None:
        self.origin = origin
        self.x: Inputs | None = None
        self.y: torch.Tensor | None = None
        self.dataset: _Items | None = None
        if isinstance(data, TensorDataset) and len(data.tensors) in (1, 2):
            data = data.tensors if len(data.tensors) == 2 else data.tensors[0]
        if isinstance(data, (tuple, list)) and len(data) == 2 and _pair(data):
            self.x, self.y = data[0], data[1]
        elif batches.is_inputs(data):
            self.x = data
        elif isinstance(data, Dataset) and hasattr(data, "__len__"):
            self.dataset = data
        else:
            raise DpwiseError(
                f"{origin} returned {type(data).__name__}; expected a pair (inputs, targets) of "
                "tensors (inputs may be a dict of tensors), a dict of tensors, or a torch Dataset "
                "with __len__"
            )
        if self.x is not None:
            self._check_rows(self.x)

    def _check_rows(self, x: Inputs) -> None:
        counts = batches.row_counts(x)
        if self.y is not None:
            counts["targets"] = self.y.shape[0]
        if len(set(counts.values())) > 1:
            seen = ", ".join(f"{k} {v}" for k, v in counts.items())
            raise DpwiseError(
                f"{self.origin} returned tensors with different numbers of rows ({seen}); every "
                "tensor needs one row per sample"
            )

    def __len__(self) -> int:
        return len(self.dataset) if self.dataset is not None else batches.rows(self._tensors())

    def _tensors(self) -> Inputs:
        """The inputs given as tensors (there are, where no Dataset was given)."""
        assert self.x is not None, "a BatchSource holds tensors or a Dataset"
        return self.x

    def get(self, rows: torch.Tensor) -> tuple[Inputs, torch.Tensor | None]:
        if self.dataset is None:
            y = None if self.y is None else self.y.index_select(0, rows)
            return batches.take(self._tensors(), rows), y
        return _split(default_collate([self.dataset[i] for i in rows.tolist()]), self.origin)


def _pair(data: Any) -> bool:
    x, y = data
    return batches.is_inputs(x) and isinstance(y, torch.Tensor)


def _split(batch: Any, origin: str) -> tuple[Inputs, torch.Tensor | None]:
    """A collated batch of items: (inputs, targets) pairs, or dicts of inputs alone."""
    if isinstance(batch, (tuple, list)) and len(batch) == 2 and _pair(batch):
        return batch[0], batch[1]
    if batches.is_inputs(batch):
        return batch, None
    raise DpwiseError(
        f"{origin}: the Dataset's items are {type(batch).__name__}; each item must be an "
        "(inputs, target) pair or a dict of tensors"
    )
