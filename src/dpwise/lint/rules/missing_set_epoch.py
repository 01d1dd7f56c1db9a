"""DPW005 missing-set-epoch: a DistributedSampler that shuffles the same way every epoch."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint import names as N
from dpwise.lint.analysis import FileContext
from dpwise.lint.index import pos
from dpwise.lint.loaders import bound_names, data_says_eval, dataset_arg, keyword, purpose
from dpwise.lint.model import UNSAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks files that build a shuffling `DistributedSampler` and run an epoch loop (`for epoch in ...`,
or an endless stream such as `while True: for batch in loader: yield batch`, where every pass is an
epoch) for a call of `set_epoch` with a non-constant argument (`sampler.set_epoch(epoch)`,
`loader.sampler.set_epoch(epoch)`, on any receiver). Samplers built with `shuffle=False` and
samplers for evaluation data are not reported.

## Why is this bad?
`DistributedSampler` seeds its shuffle with `seed + epoch`. Without `set_epoch(epoch)` the epoch
stays 0, so every epoch visits the samples in the same order: the shuffle happens once.

## Example
```python
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    for x, y in loader:
        ...
```

## Use instead
```python
sampler = DistributedSampler(dataset)
loader = DataLoader(dataset, batch_size=64, sampler=sampler)
for epoch in range(epochs):
    sampler.set_epoch(epoch)
    for x, y in loader:
        ...
```

## Fix (unsafe)
Inserts `sampler.set_epoch(epoch)` (or `loader.sampler.set_epoch(epoch)` for a sampler built
inside the `DataLoader(...)` call) as the first statement of the epoch loop that follows it in
the same function. Unsafe: the order of the samples changes from the second epoch on, which is
the point, but changes the results.

## References
- https://pytorch.org/docs/stable/data.html#torch.utils.data.distributed.DistributedSampler
  ("calling the `set_epoch()` method at the beginning of each epoch before creating the
  `DataLoader` iterator is necessary to make shuffling work properly across multiple epochs")
"""

RULE = Rule(
    code="DPW005",
    name="missing-set-epoch",
    severity="warning",
    summary="a `DistributedSampler` is used but `set_epoch` is never called in the epoch loop",
    message="`DistributedSampler` without `set_epoch(epoch)`: every epoch uses the same order",
    help="call `sampler.set_epoch(epoch)` at the start of every epoch, before iterating the loader",
    docs=DOCS,
)


def _epoch_loop(ctx: FileContext) -> bool:
    for loop in ctx.idx.loops:
        target = getattr(loop, "target", None)
        if target is not None and any(
            isinstance(n, ast.Name) and "epoch" in n.id.lower() for n in ast.walk(target)
        ):
            return True
        if _endless_passes(loop):
            return True
    return False


def _endless_passes(loop: ast.stmt) -> bool:
    """`while True:` around a pass over an iterable (`for batch in loader: yield batch`, or
    `yield from loader`): an endless stream where each pass is an epoch."""
    if not isinstance(loop, ast.While) or not (
        isinstance(loop.test, ast.Constant) and loop.test.value
    ):
        return False
    return any(
        isinstance(n, ast.For | ast.AsyncFor | ast.YieldFrom)
        for stmt in loop.body
        for n in ast.walk(stmt)
    )


def _sets_epoch(ctx: FileContext) -> bool:
    return any(
        (c.args and not isinstance(c.args[0], ast.Constant)) or c.keywords
        for c in ctx.calls_named("set_epoch")
    )


def _for_eval(ctx: FileContext, call: ast.Call) -> bool:
    said = purpose(*bound_names(ctx, call))
    if said is not None:
        return said == "eval"
    data = dataset_arg(call)
    return data is not None and data_says_eval(ctx, data, ctx.scope(call))


def check(ctx: FileContext) -> Iterator[Hit]:
    samplers = ctx.calls_to(N.DISTRIBUTED_SAMPLER)
    if not samplers or _sets_epoch(ctx) or not _epoch_loop(ctx):
        return
    for call in samplers:
        shuffle = keyword(call, "shuffle")
        if isinstance(shuffle, ast.Constant) and shuffle.value is False:
            continue
        if not _for_eval(ctx, call):
            yield Hit(call)


def _holder(ctx: FileContext, call: ast.Call) -> str | None:
    """What names the sampler where the epoch loop runs: `sampler` for `sampler =
    DistributedSampler(...)`, `loader.sampler` for `loader = DataLoader(..., sampler=...(...))`."""
    parent = ctx.idx.parents.get(call)
    suffix = ""
    if isinstance(parent, ast.keyword) and parent.arg == "sampler":
        parent = ctx.idx.parents.get(parent)
        if not (isinstance(parent, ast.Call) and ctx.qual(parent.func) in N.DATALOADER):
            return None
        call, parent, suffix = parent, ctx.idx.parents.get(parent), ".sampler"
    if not (isinstance(parent, ast.Assign) and parent.value is call and len(parent.targets) == 1):
        return None
    target = parent.targets[0]
    if isinstance(target, ast.Name) or (
        isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Name)
        and target.value.id == "self"
    ):
        return ast.unparse(target) + suffix
    return None


def _loop_after(ctx: FileContext, call: ast.Call, holder: str) -> ast.For | None:
    scope = ctx.scope(call)
    same_class = holder.startswith("self.") and ctx.class_of(scope) is not None
    for loop in ctx.idx.loops:
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)):
            continue
        if "epoch" not in loop.target.id.lower():
            continue
        where = ctx.scope(loop)
        if where == scope and pos(loop) > pos(call):
            return loop
        if same_class and where != scope and ctx.class_of(where) == ctx.class_of(scope):
            return loop
    return None


def _plan(ctx: FileContext, call: ast.Call) -> tuple[ast.For, str] | None:
    holder = _holder(ctx, call)
    loop = _loop_after(ctx, call, holder) if holder else None
    if loop is None or loop.body[0].lineno == loop.lineno:
        return None
    return loop, f"{holder}.set_epoch({loop.target.id})"  # type: ignore[attr-defined]


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    """One fix per epoch loop, setting the epoch of every reported sampler it serves (the rule
    goes quiet after the first `set_epoch`, so one at a time would leave the others out)."""
    mine = _plan(ctx, hit.node)  # type: ignore[arg-type]
    if mine is None:
        return None
    plans = [_plan(ctx, h.node) for h in check(ctx)]  # type: ignore[arg-type]
    lines = list(dict.fromkeys(p[1] for p in plans if p is not None and p[0] is mine[0]))
    edit = ctx.text.insert_before(mine[0].body[0], lines)
    message = f"Call {', '.join(f'`{line}`' for line in lines)} at the start of each epoch"
    return Fix(UNSAFE, message, (edit,)) if edit else None
