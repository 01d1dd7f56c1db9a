"""DPW014 accumulation-without-no-sync: DDP all-reduces on every micro-step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint import names as N
from dpwise.lint.analysis import FileContext
from dpwise.lint.index import FUNCTIONS, LOOPS
from dpwise.lint.loaders import assigned_values
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks files that build a `DistributedDataParallel` for gradient accumulation without `no_sync()`:
a loop whose body calls `.backward()` on every iteration but `optimizer.step()` (or
`scaler.step(optimizer)`) only under an accumulation condition (`if (i + 1) % accum == 0:`, a
name with `accum` / `micro`, a flag assigned from such a test earlier in the function such as
`update = (it + 1) % k == 0` then `if update:`, or a test on the name the loss is divided by:
`loss / k` ... `if seen == k:`), or an inner loop of micro-steps that calls `.backward()` with the
step after it. Files that use `no_sync` or toggle `require_backward_grad_sync` (nanoGPT's way)
anywhere are not reported.

## Why is this bad?
DDP all-reduces gradients during every `backward()`. With N micro-steps per optimizer step, N-1 of
those all-reduces are wasted: communication grows N times for the same result. `no_sync()` lets
the non-final micro-steps accumulate locally; the last one all-reduces the sum.

## Example
```python
for i, (x, y) in enumerate(loader):
    loss = criterion(model(x), y) / accum
    loss.backward()
    if (i + 1) % accum == 0:
        optimizer.step()
        optimizer.zero_grad()
```

## Use instead
```python
for i, (x, y) in enumerate(loader):
    last = (i + 1) % accum == 0
    with contextlib.nullcontext() if last else model.no_sync():
        loss = criterion(model(x), y) / accum
        loss.backward()
    if last:
        optimizer.step()
        optimizer.zero_grad()
```

## References
- https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html#torch.nn.parallel.DistributedDataParallel.no_sync
"""

RULE = Rule(
    code="DPW014",
    name="accumulation-without-no-sync",
    severity="warning",
    summary="gradient accumulation on a DDP model without `no_sync()`",
    message="gradient accumulation without `no_sync()`: DDP all-reduces on every micro-step",
    help="run the non-final micro-steps under `with model.no_sync():`",
    docs=DOCS,
)

_ACCUM_WORDS = ("accum", "micro", "update_freq", "grad_acc")
_SYNC_ATTRS = ("no_sync", "require_backward_grad_sync")


def _is_step(call: ast.Call) -> bool:
    if N.last_name(call.func) != "step" or not isinstance(call.func, ast.Attribute):
        return False
    owner = N.last_name(call.func.value).lower()
    return ("opt" in owner or "scaler" in owner) and "sched" not in owner


def _accumulation_test(ctx: FileContext, loop: ast.stmt, test: ast.AST) -> bool:
    """A modulo test, an accumulation-like name, or the name the loss is divided by
    (`loss / k` ... `if seen == k:`), also through a flag assigned earlier
    (`update = (it + 1) % k == 0` ... `if update:`)."""
    divisors = _divisors(loop)
    flags = [test]
    for node in ast.walk(test):
        if isinstance(node, ast.Name):
            flags += assigned_values(ctx, ctx.scope(loop), node.id)
    for flag in flags:
        for node in ast.walk(flag):
            if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
                return True
            if any(w in N.last_name(node).lower() for w in _ACCUM_WORDS):
                return True
            if (
                flag is test
                and isinstance(node, ast.Name | ast.Attribute)
                and ast.unparse(node) in divisors
            ):
                return True
    return False


def _divisors(loop: ast.stmt) -> set[str]:
    """What the loop divides by: `loss / k`, `loss /= k`, `loss.div(k)` (constants left out)."""
    found = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Div):
            found.add(node.right if isinstance(node, ast.BinOp) else node.value)
        elif isinstance(node, ast.Call) and N.last_name(node.func) in ("div", "div_"):
            found.update(node.args[:1])
    return {ast.unparse(d) for d in found if isinstance(d, ast.Name | ast.Attribute)}


def _scan(body: list[ast.stmt], conditional: ast.AST | None, out: dict) -> None:
    """Collect backward / step calls of one loop level (not inner loops or functions)."""
    for stmt in body:
        if isinstance(stmt, LOOPS):
            out["inner"].append(stmt)
            continue
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If):
            _scan(stmt.body, stmt.test, out)
            _scan(stmt.orelse, stmt.test, out)
            continue
        if isinstance(stmt, ast.With | ast.AsyncWith | ast.Try):
            for block in (stmt.body, *(h.body for h in getattr(stmt, "handlers", ()))):
                _scan(block, conditional, out)
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and N.last_name(node.func) == "backward":
                out["backward"].append((node, conditional))
            elif isinstance(node, ast.Call) and _is_step(node):
                out["step"].append((node, conditional))


def _level(loop: ast.stmt) -> dict:
    out: dict = {"backward": [], "step": [], "inner": []}
    _scan(loop.body, None, out)  # type: ignore[attr-defined]
    return out


def _accumulates(ctx: FileContext, loop: ast.stmt) -> Iterator[Hit]:
    level = _level(loop)
    eager = [b for b, cond in level["backward"] if cond is None]
    gated = [(s, c) for s, c in level["step"] if c is not None and _accumulation_test(ctx, loop, c)]
    if eager and gated and not any(c is None for _, c in level["step"]):
        yield Hit(eager[0], message=f"{RULE.message} (`.step()` only on line {gated[0][0].lineno})")
        return
    if not level["step"] or any(c is not None for _, c in level["step"]):
        return
    for inner in level["inner"]:
        micro = _level(inner)
        backward = [b for b, cond in micro["backward"] if cond is None]
        if backward and not micro["step"]:
            step = level["step"][0][0]
            yield Hit(
                backward[0],
                message=f"{RULE.message} (`.step()` after the loop, line {step.lineno})",
            )


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls or any(a in ctx.idx.attrs for a in _SYNC_ATTRS):
        return
    if "backward" not in ctx.idx.attrs:
        return
    for loop in ctx.idx.loops:
        yield from _accumulates(ctx, loop)
