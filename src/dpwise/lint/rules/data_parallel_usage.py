"""DPW001 data-parallel-usage: `nn.DataParallel` where `DistributedDataParallel` is recommended."""

from __future__ import annotations

from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks for `torch.nn.DataParallel` being built (and for the functional
`torch.nn.parallel.data_parallel`). `isinstance(model, nn.DataParallel)` checks are not reported.

## Why is this bad?
DataParallel is not deprecated (PyTorch emits no deprecation warning for it), but it is not
recommended upstream: the PyTorch documentation of `nn.DataParallel` recommends
`DistributedDataParallel` instead, even on a single machine. DataParallel is one process that
drives every GPU from Python threads (the GIL limits it), copies the model to every device on every
forward pass, and gathers outputs on the first device, so that device runs out of memory first. It
cannot span machines, and `SyncBatchNorm` does not work with it.

## Example
```python
model = nn.DataParallel(model, device_ids=[0, 1])
```

## Use instead
One process per GPU, launched with `torchrun --nproc_per_node=2 train.py`:
```python
dist.init_process_group("nccl")
local_rank = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local_rank)
model = DDP(model.to(local_rank), device_ids=[local_rank])
```

## References
- https://pytorch.org/docs/stable/generated/torch.nn.DataParallel.html
- https://github.com/pytorch/pytorch/issues/143239 (a maintainer: DataParallel "is not a
  deprecated API")
"""

RULE = Rule(
    code="DPW001",
    name="data-parallel-usage",
    severity="warning",
    summary="`nn.DataParallel` is used where PyTorch recommends `DistributedDataParallel`",
    message=(
        "`nn.DataParallel` is not recommended upstream: PyTorch's documentation recommends "
        "`DistributedDataParallel` (DataParallel is not deprecated)"
    ),
    help=(
        "use `DistributedDataParallel` with one process per GPU, launched with "
        "`torchrun --nproc_per_node=N train.py`"
    ),
    docs=DOCS,
)


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.calls_to(N.DATA_PARALLEL | N.DATA_PARALLEL_FUNCTIONAL):
        yield Hit(call)
