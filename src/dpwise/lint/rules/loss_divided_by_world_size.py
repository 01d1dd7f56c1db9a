"""DPW021 loss-divided-by-world-size: the loss is divided by the world size under DDP."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import pos
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks files that build a `DistributedDataParallel` for a loss divided by the world size before
its `backward()`: `(loss / world_size).backward()`, `loss = criterion(out, y) / world_size` or
`loss /= dist.get_world_size()` as the last assignment of the name before `loss.backward()`
(also through `scaler.scale(loss)`). World sizes recognised: names containing `world_size`,
`dist.get_world_size()`, `os.environ["WORLD_SIZE"]`, `accelerator.num_processes`. A name that the
same function passes to an `all_reduce` / `reduce` (a loss averaged over ranks for logging) is not
reported.

## Why is this bad?
DDP's gradient all-reduce already averages: each rank's gradient is summed over ranks and
divided by the world size (measured with torch 2.13, CPU, gloo, two processes: the DDP gradient
equals the mean of the two local gradients, not their sum). Dividing the loss again scales every
gradient by a further 1 / world size. With SGD that is the learning rate divided by the world
size, so the single-process hyper-parameters no longer carry over; adaptive optimizers such as
Adam mostly cancel a constant scale, but gradient clipping thresholds and `eps` do not.

## Example
```python
loss = criterion(model(x), y) / dist.get_world_size()
loss.backward()
```

## Use instead
```python
loss = criterion(model(x), y)  # DDP averages the gradients over ranks
loss.backward()
```

## References
- https://pytorch.org/docs/stable/notes/ddp.html
"""

RULE = Rule(
    code="DPW021",
    name="loss-divided-by-world-size",
    severity="warning",
    summary="the loss is divided by the world size under DDP, which already averages gradients",
    message="the loss is divided by the world size: DDP already averages gradients over ranks, "
    "so they end up 1 / world size too small",
    help="drop the division; DDP's all-reduce divides the summed gradients by the world size",
    docs=DOCS,
)

_SIZE_NAMES = frozenset({"num_processes", "get_world_size"})
_REDUCES = ("all_reduce", "reduce", "all_gather")


def _world_size(expr: ast.AST) -> bool:
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Name) and expr.func.id in ("int", "float") and expr.args:
            return _world_size(expr.args[0])
        return N.last_name(expr.func) in _SIZE_NAMES
    if isinstance(expr, ast.Subscript):
        return N.str_value(expr.slice) == "WORLD_SIZE"
    if isinstance(expr, ast.Name | ast.Attribute):
        name = N.last_name(expr).lower()
        return "world_size" in name or name in _SIZE_NAMES
    return False


def _divides(expr: ast.AST) -> ast.BinOp | None:
    for node in ast.walk(expr):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div) and _world_size(node.right):
            return node
    return None


def _divisions(ctx: FileContext, scope: str) -> list[ast.AugAssign]:
    """The `name /= ...` statements inside `scope` (nested functions included)."""
    return [
        node
        for node in ast.walk(ctx.function_node(scope))
        if isinstance(node, ast.AugAssign)
        and isinstance(node.op, ast.Div)
        and isinstance(node.target, ast.Name)
    ]


def _last_write(
    ctx: FileContext, scope: str, name: str, before: tuple[int, int], augs: list[ast.AugAssign]
) -> ast.AST | None:
    """The value of the last `name = ...` (or the `name /= ...` statement) before `before`."""
    found: list[tuple[tuple[int, int], ast.AST]] = []
    for stmt in ctx.idx.assigns.get(scope, ()):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets) and stmt.value:
            found.append((pos(stmt), stmt.value))
    found += [(pos(a), a) for a in augs if isinstance(a.target, ast.Name) and a.target.id == name]
    earlier = sorted((f for f in found if f[0] < before), key=lambda f: f[0])
    return earlier[-1][1] if earlier else None


def _reduced(ctx: FileContext, scope: str, name: str) -> bool:
    return any(
        N.last_name(c.func) in _REDUCES
        and any(isinstance(a, ast.Name) and a.id == name for a in c.args)
        for c in ctx.idx.calls.get(scope, ())
    )


def _hit(ctx: FileContext, backward: ast.Call, augs: dict[str, list]) -> ast.AST | None:
    loss = backward.func.value  # type: ignore[attr-defined]  # `loss.backward()`: a method call (check's)
    if isinstance(loss, ast.Call) and N.last_name(loss.func) == "scale" and loss.args:
        loss = loss.args[0]
    if not isinstance(loss, ast.Name):
        return _divides(loss)
    scope = ctx.scope(backward)
    if scope not in augs:
        augs[scope] = _divisions(ctx, scope)
    value = _last_write(ctx, scope, loss.id, pos(backward), augs[scope])
    if value is None or _reduced(ctx, scope, loss.id):
        return None
    if isinstance(value, ast.AugAssign):
        return value if _world_size(value.value) else None
    return _divides(value)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls:
        return
    augs: dict[str, list] = {}
    for call in ctx.calls_named("backward"):
        if isinstance(call.func, ast.Attribute):
            node = _hit(ctx, call, augs)
            if node is not None:
                yield Hit(node)
