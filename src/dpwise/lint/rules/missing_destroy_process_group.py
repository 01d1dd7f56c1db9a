"""DPW011 missing-destroy-process-group."""

from __future__ import annotations

from collections.abc import Iterator

from dpwise.lint import names as N
from dpwise.lint.analysis import FileContext
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks scripts (files with an `if __name__ == "__main__":` block, or distributed set-up at module
level) that call `init_process_group` for a call of `destroy_process_group` anywhere in the same
file (directly or in a same-file `cleanup()`). A call into another module named like a clean-up
(`utils.cleanup()`, `teardown_distributed()`) is trusted to destroy the group. Library modules
that create a process group on their caller's behalf are not checked: the caller owns it.

## Why is this bad?
The process group holds sockets, NCCL communicators and their GPU memory. Exiting without
destroying it makes PyTorch warn (`ProcessGroupNCCL` "was not destroyed"), can hang at exit while
NCCL waits for peers, and leaks the group into anything that runs afterwards in the same process
(a test, a notebook, a second training phase).

## Example
```python
def main():
    dist.init_process_group("nccl")
    train()
```

## Use instead
```python
def main():
    dist.init_process_group("nccl")
    try:
        train()
    finally:
        dist.destroy_process_group()
```

## References
- https://pytorch.org/docs/stable/distributed.html#shutdown
"""

RULE = Rule(
    code="DPW011",
    name="missing-destroy-process-group",
    severity="warning",
    summary="`init_process_group` is called but `destroy_process_group` never is",
    message="`init_process_group` is called but `destroy_process_group` never is",
    help="call `dist.destroy_process_group()` when training ends (in a `finally:` block)",
    docs=DOCS,
)

_CLEANUP = ("cleanup", "clean_up", "teardown", "tear_down", "destroy", "shutdown")


def _cleans_up(ctx: FileContext) -> bool:
    if ctx.calls_to(N.DESTROY) or any(True for _ in ctx.calls_named("destroy_process_group")):
        return True
    for call in ctx.idx.all_calls():
        if ctx.callee(call) is None and not (ctx.qual(call.func) or "").startswith("torch."):
            name = N.last_name(call.func).lower()
            if any(word in name for word in _CLEANUP):
                return True
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    if ctx.init_calls and ctx.is_script and not _cleans_up(ctx):
        yield Hit(ctx.init_calls[0])
