"""DistributedDataParallel whose most reported failure becomes one line naming the cause.

When parameters get no gradient in a step, DDP's next forward raises "Expected to have finished
reduction in the prior iteration ..." with a page of advice and the indices of the parameters.
This wrapper turns it into a DpwiseError that names their modules and the flag that fixes it.
"""

from __future__ import annotations

from typing import Any

from torch import nn
from torch.nn.parallel import DistributedDataParallel

from dpwise.diagnosis.layers import group
from dpwise.diagnosis.unused import REDUCTION_ERROR, unused_from_error
from dpwise.errors import DpwiseError


def unused_message(model: nn.Module, error: str, find_unused: bool) -> str:
    layers = unused_from_error(model, error)
    what = group(layers) or "some parameters (TORCH_DISTRIBUTED_DEBUG=DETAIL names them)"
    if find_unused:
        return (
            f"DDP stopped: {what} got no gradient, and with find_unused_parameters on DDP still "
            "could not find them: return every output tensor from forward and use them in the loss"
        )
    return (
        f"DDP stopped: {what} got no gradient in the previous step (the loss did not reach them, "
        "e.g. a block skipped at random or a branch not taken); rerun with "
        "--find-unused-parameters (train and compare), or train with --static-graph when the "
        "same parameters go unused in every step"
    )


class GuardedDDP(DistributedDataParallel):
    """DistributedDataParallel; its unused-parameter failure is a DpwiseError (exit 2)."""

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().forward(*args, **kwargs)
        except RuntimeError as exc:
            if REDUCTION_ERROR not in str(exc):
                raise
            raise DpwiseError(
                unused_message(self.module, str(exc), self.find_unused_parameters)
            ) from None
