"""Which rows each step trains on (DistributedSampler's rule) and how a batch is fetched."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import Dataset, TensorDataset, default_collate

from dpwise.errors import DpwiseError


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


class BatchSource:
    """Random access to (x, y) batches by row indices."""

    def __init__(self, data: Any, origin: str) -> None:
        if isinstance(data, TensorDataset) and len(data.tensors) == 2:
            data = data.tensors
        if (
            isinstance(data, (tuple, list))
            and len(data) == 2
            and all(isinstance(t, torch.Tensor) for t in data)
        ):
            x, y = data
            if x.shape[0] != y.shape[0]:
                raise DpwiseError(
                    f"{origin} returned inputs with {x.shape[0]} rows and targets with "
                    f"{y.shape[0]}; both need one row per sample"
                )
            self.x, self.y, self.dataset = x, y, None
        elif isinstance(data, Dataset) and hasattr(data, "__len__"):
            self.x = self.y = None
            self.dataset = data
        else:
            raise DpwiseError(
                f"{origin} returned {type(data).__name__}; expected a torch Dataset of (x, y) "
                "pairs with __len__, or a pair of tensors (x, y)"
            )

    def __len__(self) -> int:
        return len(self.dataset) if self.dataset is not None else self.x.shape[0]

    def get(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.dataset is None:
            return self.x.index_select(0, rows), self.y.index_select(0, rows)
        return default_collate([self.dataset[i] for i in rows.tolist()])
