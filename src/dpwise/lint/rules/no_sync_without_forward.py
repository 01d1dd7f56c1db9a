"""DPW019 no-sync-without-forward: `no_sync()` around the backward pass but not the forward."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import pos
from dpwise.lint.analysis.wrappers import Wrappers
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks `with model.no_sync():` blocks (also `with nullcontext() if last else model.no_sync():`)
whose body calls `.backward()` but never runs the model: no `model(...)`, no `model.forward(...)`,
no call of another name for the same DDP wrapper, no call that is handed `model` (a helper
such as `compute_loss(model, batch)` is trusted to run it), and no assignment of the tensor the
backward uses (`loss = self.training_step(batch)` inside the block is trusted to run it).

## Why is this bad?
DDP decides during the forward pass whether the next backward all-reduces. Its documentation of
`no_sync` says: "The forward pass should be included inside the context manager, or else
gradients will still be synchronized." Measured with torch 2.13 (CPU, gloo, two processes): with
the forward outside, the two ranks ended the backward with equal (all-reduced) gradients; with it
inside, each kept its own. So every micro-step still all-reduces: the accumulation runs, but the
communication it was meant to save is spent anyway.

## Example
```python
loss = criterion(model(x), y) / accum
with model.no_sync():
    loss.backward()
```

## Use instead
```python
with model.no_sync():
    loss = criterion(model(x), y) / accum
    loss.backward()
```

## References
- https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#torch.nn.parallel.DistributedDataParallel.no_sync
"""

RULE = Rule(
    code="DPW019",
    name="no-sync-without-forward",
    severity="warning",
    summary="`no_sync()` wraps the backward pass but not the forward: gradients still synchronise",
    message="`no_sync()` without the forward pass inside: gradients are still all-reduced",
    help="move the forward pass (`loss = criterion(model(x), y)`) into the `with model.no_sync():`"
    " block",
    docs=DOCS,
)


def _with_of(ctx: FileContext, call: ast.Call) -> ast.With | ast.AsyncWith | None:
    child: ast.AST = call
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.With | ast.AsyncWith):
            return parent if any(child is item for item in parent.items) else None
        child = parent
    return None


def _runs_model(ctx: FileContext, wrappers: Wrappers, body_call: ast.Call, model: str) -> bool:
    func = body_call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    if ast.dump(func) == model:
        return True
    handed = (*body_call.args, *(k.value for k in body_call.keywords))
    if any(ast.dump(a) == model for a in handed):
        return True
    if isinstance(func, ast.Name | ast.Attribute):
        return wrappers.kind(func, ctx.scope(body_call), pos(body_call)) is not None
    return False


def _computed_inside(block: ast.With | ast.AsyncWith, backward: ast.Call) -> bool:
    """A name the backward call uses (`loss` of `loss.backward()`, `accelerator.backward(loss)`)
    is assigned inside the block: the loss is computed there, by code that may run the model."""
    used = {n.id for n in ast.walk(backward) if isinstance(n, ast.Name)}
    for stmt in block.body:
        for node in ast.walk(stmt):
            targets = getattr(node, "targets", None) or [getattr(node, "target", None)]
            if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign) and any(
                isinstance(t, ast.Name) and t.id in used for t in targets
            ):
                return True
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    wrappers: Wrappers | None = None
    for call in ctx.calls_named("no_sync"):
        if not isinstance(call.func, ast.Attribute):
            continue
        block = _with_of(ctx, call)
        if block is None:
            continue
        calls = [n for s in block.body for n in ast.walk(s) if isinstance(n, ast.Call)]
        backwards = [c for c in calls if N.last_name(c.func) == "backward"]
        if not backwards or any(_computed_inside(block, b) for b in backwards):
            continue
        wrappers = wrappers or Wrappers(ctx)
        model = ast.dump(call.func.value)
        if not any(_runs_model(ctx, wrappers, c, model) for c in calls):
            yield Hit(call)
