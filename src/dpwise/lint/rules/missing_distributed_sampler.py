"""DPW004 missing-distributed-sampler: every rank trains on the same data."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.guards import mentions_rank
from dpwise.lint.analysis.index import MODULE
from dpwise.lint.analysis.loaders import (
    assigned_values,
    bound_names,
    data_is_split,
    data_says_eval,
    dataset_arg,
    has_sampler,
    purpose,
    single_process_branch,
)
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks DDP scripts (files that build a `DistributedDataParallel`, or scripts that call
`init_process_group`) that train (call `.backward()`) for a `DataLoader` with no `sampler=` /
`batch_sampler=`.

Not reported: loaders in the single-process branch of `if args.distributed: ... else: ...`
(or `if world_size > 1:`, `if not ddp:`), loaders for evaluation (`val_loader`, `test_ds`, built
in `def evaluate`, `CIFAR10(train=False)`, `split="test"`; evaluation on every rank is a choice),
data sets already split per rank (`Subset(ds, range(rank, n, world_size))`, `ds.shard(...)`,
`split_dataset_by_node(...)`, anything built with the rank) and streams (`IterableDataset`
subclasses, `WebDataset`, `streaming=True`), which shard themselves.

The analysis is per file, with one exception: a loader built by a helper imported from a module
beside the script (`from common import get_dataloader`, as in the guide's `ddp_train.py`) is
followed into that module; when the helper builds a `DataLoader` without a sampler and never
mentions ranks, samplers or shards, the call in the DDP script is reported, unless its loader is
handed straight to a function that re-shards it (named like `distributed_loader` or
`shard_loader`: `_distributed_loader(get_dataloader(...))`, what `dpwise migrate` writes). The
same holds for a `DataLoader(...)` built inside such a call.
Helpers that cannot be found are not guessed at.

## Why is this bad?
Without a `DistributedSampler` every process iterates over the whole data set. With the same seed
on every rank the batches are identical, so the all-reduce averages identical gradients: N GPUs
do one GPU's work. With different seeds the batches overlap, each epoch visits every sample
world-size times, and the global batch is world-size times the per-rank batch without anyone
having chosen it.

## Example
```python
loader = DataLoader(dataset, batch_size=64, shuffle=True)
```

## Use instead
```python
sampler = DistributedSampler(dataset, shuffle=True)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    ...
```

## References
- https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler
"""

RULE = Rule(
    code="DPW004",
    name="missing-distributed-sampler",
    severity="warning",
    summary="a DDP script trains from a `DataLoader` with no `DistributedSampler`",
    message="this `DataLoader` has no `DistributedSampler`: every rank trains on the same data",
    help="pass `sampler=DistributedSampler(dataset)` (and drop `shuffle=True`), then call "
    "`sampler.set_epoch(epoch)` every epoch",
    docs=DOCS,
)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.is_ddp_script or not ctx.trains:
        return
    resharded = _resharded(ctx)
    for call in ctx.calls_to(N.DATALOADER):
        if has_sampler(call) or single_process_branch(ctx, call) or id(call) in resharded:
            continue
        if _for_training(ctx, call) and not _split(ctx, call):
            yield Hit(call)
    yield from _imported_loaders(ctx)


def _for_training(ctx: FileContext, call: ast.Call) -> bool:
    scope = ctx.scope(call)
    said = purpose(*bound_names(ctx, call))
    if said is not None:
        return said == "train"
    said = purpose(scope.rsplit(".", 1)[-1]) if scope != MODULE else None
    if said is not None:
        return said == "train"
    data = dataset_arg(call)
    return data is not None and not data_says_eval(ctx, data, scope)


def _split(ctx: FileContext, call: ast.Call) -> bool:
    """Already split per rank, a stream, or a parameter we cannot see the value of."""
    scope, data = ctx.scope(call), dataset_arg(call)
    if data is None or data_is_split(ctx, data, scope):
        return True
    info = ctx.idx.functions.get(scope)
    if not (isinstance(data, ast.Name) and info and data.id in info.params):
        return False
    if any(True for _ in assigned_values(ctx, scope, data.id)):
        return False
    index = info.params.index(data.id)
    sites = ctx.callers.get(scope, [])
    for caller, site in sites:
        arg = next((k.value for k in site.keywords if k.arg == data.id), None)
        if arg is None and index < len(site.args):
            arg = site.args[index]
        if arg is None or data_is_split(ctx, arg, caller) or data_says_eval(ctx, arg, caller):
            return True
    return not sites  # nobody in this file calls the helper: its data is unknown


def _imported_loaders(ctx: FileContext) -> Iterator[Hit]:
    """`loader = get_dataloader(...)` where the helper lives in a sibling module."""
    if ctx.project is None:
        return
    resharded = _resharded(ctx)
    for call in ctx.idx.all_calls():
        q = ctx.qual(call.func)
        if q is None or ctx.callee(call) is not None or "." not in q.lstrip("."):
            continue
        if id(call) in resharded:
            continue
        module, _, func = q.rpartition(".")
        found = ctx.project.loader_factory(ctx.path, module, func)
        if found is None or mentions_rank(call) or _passes_sampler(call):
            continue
        if purpose(*bound_names(ctx, call)) == "eval":
            continue
        path, line = found
        yield Hit(
            call,
            message=(
                f"`{func}` ({path}:{line}) builds a `DataLoader` without a `DistributedSampler`: "
                "every rank trains on the same data"
            ),
            help=f"give `{func}` a `DistributedSampler` (pass the rank and world size, or the "
            "sampler), then call `sampler.set_epoch(epoch)` every epoch",
        )


def _resharded(ctx: FileContext) -> set[int]:
    """Loaders handed straight to a call that re-shards them (`_distributed_loader(get_loader())`,
    `shard_loader(make_loader(...))`): the ids of those inner calls."""
    found: set[int] = set()
    for call in ctx.idx.all_calls():
        name = (
            N.last_name(call.func).lower()
            if isinstance(call.func, ast.Name | ast.Attribute)
            else ""
        )
        if ("distributed" in name or "shard" in name) and "loader" in name:
            found.update(id(arg) for arg in call.args if isinstance(arg, ast.Call))
    return found


def _passes_sampler(call: ast.Call) -> bool:
    words = ("sampler", "shard", "world", "distributed", "replica")
    return any(k.arg and any(w in k.arg.lower() for w in words) for k in call.keywords)
