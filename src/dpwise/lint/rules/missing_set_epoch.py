"""DPW005 missing-set-epoch: a DistributedSampler that shuffles the same way every epoch."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import pos
from dpwise.lint.analysis.loaders import assigned_values, in_factory, shuffling_samplers
from dpwise.lint.model import UNSAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks files that build a shuffling `DistributedSampler` and run an epoch loop (`for epoch in ...`,
or an endless stream such as `while True: for batch in loader: yield batch`, where every pass is an
epoch, except a sampler's or iterator's own (`__iter__`, `__next__`, a method of a class named
like a sampler), which yields indices; also `for _ in range(args.epochs)` and
`for _ in trange(n, desc="Epoch")`, whose range counts epochs) for a call of `set_epoch` with a
non-constant argument (`sampler.set_epoch(epoch)`, `loader.sampler.set_epoch(epoch)`, on any
receiver). Samplers built with `shuffle=False` and
samplers for evaluation data are not reported. A library function that builds the sampler and
returns it (or a loader made from it) without iterating it, and that no epoch loop of its own file
calls, leaves `set_epoch` to its caller: the finding is reported in the script that calls it
(`get_loader(args)` from a sibling module, or from a package whose `__init__.py` re-exports it
from a submodule, three re-exports deep) when that script runs an epoch loop with no
`set_epoch`; there is no automatic fix for it (the sampler is not in that file). Where it stops:
a helper of another installed package (not in the project's folders) is not read.

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


_EPOCH_COUNT = re.compile(r"(n_?|num_|max_|total_)?(train_)?epochs?")


def _counts_epochs(ctx: FileContext, loop: ast.stmt) -> bool:
    """`for _ in range(args.epochs)`, `for _ in trange(n, desc="Epoch")`, or a name assigned
    such a range (`train_iterator = trange(..., int(args.num_train_epochs))`)."""
    it = getattr(loop, "iter", None)
    if it is None:
        return False
    exprs = [it]
    if isinstance(it, ast.Name):
        exprs += assigned_values(ctx, ctx.scope(loop), it.id)
    for expr in exprs:
        for node in ast.walk(expr):
            if isinstance(node, ast.Name | ast.Attribute) and _EPOCH_COUNT.fullmatch(
                N.last_name(node).lower()
            ):
                return True
            if N.str_value(node) in ("Epoch", "epoch", "Epochs", "epochs"):
                return True
    return False


def _is_epoch_loop(ctx: FileContext, loop: ast.stmt) -> bool:
    target = getattr(loop, "target", None)
    if target is not None and any(
        isinstance(n, ast.Name) and "epoch" in n.id.lower() for n in ast.walk(target)
    ):
        return True
    return (_endless_passes(loop) and not _in_sampler(ctx, loop)) or _counts_epochs(ctx, loop)


def _in_sampler(ctx: FileContext, loop: ast.stmt) -> bool:
    """A `while True:` of a sampler's or iterator's own (`__iter__` / `__next__`, or a method of
    a class named like a sampler): how it yields indices, not a training loop's epochs."""
    scope = ctx.scope(loop)
    info = ctx.idx.functions.get(scope)
    name = info.node.name if info is not None else ""
    owner = (ctx.class_of(scope) or "").rsplit(".", 1)[-1]
    return name in ("__iter__", "__next__") or owner.lower().endswith("sampler")


def _epoch_loop(ctx: FileContext) -> bool:
    return any(_is_epoch_loop(ctx, loop) for loop in ctx.idx.loops)


def _handed_off(ctx: FileContext, call: ast.Call) -> bool:
    """Built by a library function for its callers, and no caller in this file runs the epochs
    (`make_loader(data)` called from this file's own `for epoch in ...` function is not)."""
    if not in_factory(ctx, call):
        return False
    callers = {caller for caller, _ in ctx.callers.get(ctx.scope(call), ())}
    return not any(
        ctx.scope(loop) in callers and _is_epoch_loop(ctx, loop) for loop in ctx.idx.loops
    )


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


def _factory_calls(ctx: FileContext) -> Iterator[tuple[ast.Call, str]]:
    """Calls of another module's function that builds a shuffling `DistributedSampler` and
    returns it (`train_loader, _ = get_loader(args)` with the sampler made in utils/data.py)."""
    if ctx.project is None:
        return
    for call, module, func in ctx.sibling_calls():
        where = ctx.project.sampler_factory(ctx.path, module, func)
        if where is not None:
            yield call, where


def check(ctx: FileContext) -> Iterator[Hit]:
    if _sets_epoch(ctx):
        return
    local = [call for call in shuffling_samplers(ctx) if not _handed_off(ctx, call)]
    remote = list(_factory_calls(ctx)) if ctx.is_ddp_script else []
    if not (local or remote) or not _epoch_loop(ctx):
        return
    for call in local:
        yield Hit(call)
    for call, where in remote:
        name = N.last_name(call.func)
        message = (
            f"`{name}` builds a shuffling `DistributedSampler` ({where}) but `set_epoch(epoch)` "
            "is never called: every epoch uses the same order"
        )
        yield Hit(call, message=message, data="factory")  # the sampler is not in this file


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
    return loop, f"{holder}.set_epoch({loop.target.id})"  # type: ignore[attr-defined]  # _loop_after's loops have an epoch Name


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    """One fix per epoch loop, setting the epoch of every reported sampler it serves (the rule
    goes quiet after the first `set_epoch`, so one at a time would leave the others out)."""
    mine = _plan(ctx, hit.node) if hit.data != "factory" else None  # type: ignore[arg-type]  # a hit but a factory's is the loader's call
    if mine is None:
        return None
    plans = [_plan(ctx, h.node) for h in check(ctx) if h.data != "factory"]  # type: ignore[arg-type]  # as above
    lines = list(dict.fromkeys(p[1] for p in plans if p is not None and p[0] is mine[0]))
    edit = ctx.text.insert_before(mine[0].body[0], lines)
    message = f"Call {', '.join(f'`{line}`' for line in lines)} at the start of each epoch"
    return Fix(UNSAFE, message, (edit,)) if edit else None
