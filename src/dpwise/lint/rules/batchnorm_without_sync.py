"""DPW015 batchnorm-without-sync (info): BatchNorm under DDP without SyncBatchNorm."""

from __future__ import annotations

from collections.abc import Iterator

from dpwise.lint.analysis.batchnorm import uses_batchnorm
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks files that wrap a model in `DistributedDataParallel` and use BatchNorm layers
(`nn.BatchNorm1d/2d/3d`, their lazy forms, or a torchvision model family built with BatchNorm such
as `resnet50()`) without `nn.SyncBatchNorm.convert_sync_batchnorm(...)` or `nn.SyncBatchNorm`
anywhere in the file. The BatchNorm must appear in the same file (a model imported from elsewhere
is not inspected). Reported once per file, at the first `DistributedDataParallel(...)`.

This is information, not an error: per-rank BatchNorm statistics are often fine.

## Why is this bad?
Under DDP each rank normalises with the mean and variance of its own per-GPU batch, and the running
statistics differ between ranks (rank 0's are the ones usually saved). With small per-GPU batches
(detection, segmentation, large inputs) the estimates are noisy and accuracy drops; results also
change with the number of GPUs. `SyncBatchNorm` computes the statistics over the global batch, at
the cost of an all-reduce per BatchNorm layer.

## Example
```python
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU()).to(local_rank)
model = DDP(model, device_ids=[local_rank])
```

## Use instead
```python
model = nn.Sequential(nn.Conv2d(3, 64, 3), nn.BatchNorm2d(64), nn.ReLU())
model = nn.SyncBatchNorm.convert_sync_batchnorm(model).to(local_rank)
model = DDP(model, device_ids=[local_rank])
```
Or keep per-rank statistics on purpose and silence it: `--ignore batchnorm-without-sync`.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.SyncBatchNorm.html
"""

RULE = Rule(
    code="DPW015",
    name="batchnorm-without-sync",
    severity="info",
    summary="a model with BatchNorm is wrapped in DDP without `SyncBatchNorm` (a choice)",
    message="BatchNorm under DDP without `SyncBatchNorm`: each rank normalises with its own batch "
    "statistics",
    help="if per-GPU batches are small, convert before wrapping: "
    "`model = nn.SyncBatchNorm.convert_sync_batchnorm(model)`",
    docs=DOCS,
)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls or "SyncBatchNorm" in ctx.source:
        return
    if "convert_sync_batchnorm" in ctx.idx.attrs or not uses_batchnorm(ctx):
        return
    yield Hit(ctx.ddp_calls[0])
