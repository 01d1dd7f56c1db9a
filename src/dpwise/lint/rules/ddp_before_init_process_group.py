"""DPW003 ddp-before-init-process-group."""

from __future__ import annotations

from collections.abc import Iterator

from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import Flow, is_init
from dpwise.lint.analysis.index import pos
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks that `torch.distributed.init_process_group` runs before each `DistributedDataParallel(...)`:
earlier in the same function, inside a same-file function called earlier (`setup()`), or before
every same-file call of the function that builds the wrapper. A function handed to `mp.spawn` starts
with no process group, so it must initialise one itself. A call into another module named like a
set-up (`init_distributed_mode(args)`, `utils.setup_ddp()`) is trusted to initialise. Files that
never initialise a process group and have no `if __name__ == "__main__":` block are treated as
libraries and not checked; functions the file never calls are not judged.

## Why is this bad?
`DistributedDataParallel` needs the default process group to broadcast the initial parameters from
rank 0; without it the constructor fails ("Default process group has not been initialized").

## Example
```python
def main(rank, world_size):
    model = DDP(Net().to(rank), device_ids=[rank])
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
```

## Use instead
```python
def main(rank, world_size):
    dist.init_process_group("nccl", rank=rank, world_size=world_size)
    torch.cuda.set_device(rank)
    model = DDP(Net().to(rank), device_ids=[rank])
```
"""

RULE = Rule(
    code="DPW003",
    name="ddp-before-init-process-group",
    severity="error",
    summary="`DistributedDataParallel` is built before `init_process_group` has run",
    message="`DistributedDataParallel` is built before `init_process_group` has run",
    help="call `dist.init_process_group(...)` first (e.g. at the start of the worker function)",
    docs=DOCS,
)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls:
        return
    flow = Flow(ctx, is_init)
    if not (ctx.has_main_guard or any(is_init(ctx, c) for c in ctx.idx.all_calls())):
        return
    for call in ctx.ddp_calls:
        scope = ctx.scope(call)
        if flow.established(scope, call) is not False:
            continue
        later = [c for c in ctx.idx.calls.get(scope, ()) if pos(c) > pos(call) and flow.does(c)]
        message = None
        if later:
            message = (
                f"`DistributedDataParallel` is built before `init_process_group`, which runs "
                f"only later (line {later[0].lineno})"
            )
        yield Hit(call, message=message)
