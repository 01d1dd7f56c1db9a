"""DPW014 accumulation-without-no-sync: DDP all-reduces on every micro-step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import FUNCTIONS, LOOPS, Loop
from dpwise.lint.analysis.loaders import assigned_values
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks files that build a `DistributedDataParallel` for gradient accumulation without `no_sync()`:
a loop whose body calls `.backward()` on every iteration but `optimizer.step()` (or
`scaler.step(optimizer)`) only under an accumulation condition (`if (i + 1) % accum == 0:`, a
name with `accum` / `micro`, a flag assigned from such a test earlier in the function such as
`update = (it + 1) % k == 0` then `if update:`, or a test on the name the loss is divided by:
`loss / k` ... `if seen == k:`), or an inner loop of micro-steps that calls `.backward()` with the
step after it. A backward under an `if` that is not an accumulation test (`if fp16:
scaler.scale(loss).backward() else: loss.backward()`) still runs every iteration. A function that
runs one micro-step per call (`def optimize(self, loss):` with `loss.backward()` on every call and
`optimizer.step()` under `if self.n_iter % k == 0:`) is checked the same way as a loop body.
Each branch of an `if` in the loop is also checked on its own: `if ACCUMULATION_STEPS > 1:`
accumulating, `else:` stepping every pass, is accumulation in the first branch.
Files that use `no_sync` or toggle `require_backward_grad_sync` (nanoGPT's way) anywhere, directly
or through a helper of this file or a sibling module (`with misc.ddp_sync(ddp, last):` whose
definition calls `no_sync()`), are not reported.

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


def _accumulation_test(ctx: FileContext, loop: ast.AST, scope: str, test: ast.AST) -> bool:
    """A modulo test, an accumulation-like name, or the name the loss is divided by
    (`loss / k` ... `if seen == k:`), also through a flag assigned earlier
    (`update = (it + 1) % k == 0` ... `if update:`)."""
    divisors = _divisors(loop)
    flags = [test]
    # follow a flag such as `update`, not the `args` of `args.fp16`
    owners = {id(n.value) for n in ast.walk(test) if isinstance(n, ast.Attribute)}
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and id(node) not in owners:
            flags += assigned_values(ctx, scope, node.id)
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


def _divisors(loop: ast.AST) -> set[str]:
    """What the loop divides by: `loss / k`, `loss /= k`, `loss.div(k)` (constants left out)."""
    found = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Div):
            found.add(node.right if isinstance(node, ast.BinOp) else node.value)
        elif isinstance(node, ast.Call) and N.last_name(node.func) in ("div", "div_"):
            found.update(node.args[:1])
    return {ast.unparse(d) for d in found if isinstance(d, ast.Name | ast.Attribute)}


def _scan(body: list[ast.stmt], conditions: tuple[ast.AST, ...], out: dict) -> None:
    """Collect backward / step calls of one loop level (not inner loops or functions), each with
    the tests of the `if` statements around it."""
    for stmt in body:
        if isinstance(stmt, LOOPS):
            out["inner"].append(stmt)
            continue
        if isinstance(stmt, (*FUNCTIONS, ast.ClassDef)):
            continue
        if isinstance(stmt, ast.If):
            _scan(stmt.body, (*conditions, stmt.test), out)
            _scan(stmt.orelse, (*conditions, stmt.test), out)
            continue
        if isinstance(stmt, ast.With | ast.AsyncWith | ast.Try):
            for block in (stmt.body, *(h.body for h in getattr(stmt, "handlers", ()))):
                _scan(block, conditions, out)
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Call) and N.last_name(node.func) == "backward":
                out["backward"].append((node, conditions))
            elif isinstance(node, ast.Call) and _is_step(node):
                out["step"].append((node, conditions))


def _level(body: list[ast.stmt]) -> dict:
    out: dict = {"backward": [], "step": [], "inner": []}
    _scan(body, (), out)
    return out


def _gated_step(ctx: FileContext, where: ast.AST, scope: str, level: dict) -> ast.Call | None:
    """The optimizer step, when every step of this level sits under an accumulation test and a
    backward runs on every pass (under no accumulation test: `if fp16: ... else:
    loss.backward()` is still every pass)."""

    def accumulating(conditions: tuple[ast.AST, ...]) -> bool:
        return any(_accumulation_test(ctx, where, scope, c) for c in conditions)

    eager = [b for b, conds in level["backward"] if not accumulating(conds)]
    gated = [s for s, conds in level["step"] if accumulating(conds)]
    return eager[0] if eager and gated and len(gated) == len(level["step"]) else None


def _accumulates(ctx: FileContext, loop: Loop) -> Iterator[Hit]:
    level = _level(loop.body)
    backward = _gated_step(ctx, loop, ctx.scope(loop), level)
    if backward is None:  # `if ACCUMULATION_STEPS > 1: <accumulates> else: <steps every pass>`
        backward, branch = _gated_branch(ctx, loop)
        level = branch if backward is not None else level
    if backward is not None:
        step = next(s for s, _ in level["step"])
        yield Hit(backward, message=f"{RULE.message} (`.step()` only on line {step.lineno})")
        return
    if not level["step"] or any(conds for _, conds in level["step"]):
        return
    for inner in level["inner"]:
        micro = _level(inner.body)
        backward_calls = [b for b, conds in micro["backward"] if not conds]
        if backward_calls and not micro["step"]:
            step = level["step"][0][0]
            yield Hit(
                backward_calls[0],
                message=f"{RULE.message} (`.step()` after the loop, line {step.lineno})",
            )


def _gated_branch(ctx: FileContext, loop: Loop) -> tuple[ast.Call | None, dict]:
    """A branch of an `if` in the loop that accumulates on its own (its backward every pass, its
    steps only under an accumulation test), whatever the other branch does."""
    for stmt in loop.body:
        if not isinstance(stmt, ast.If):
            continue
        for branch in (stmt.body, stmt.orelse):
            level = _level(branch)
            backward = _gated_step(ctx, loop, ctx.scope(loop), level)
            if backward is not None:
                return backward, level
    return None, {}


def _per_micro_step(ctx: FileContext) -> Iterator[Hit]:
    """A function that runs one micro-step per call (`def optimize(self, loss):` with
    `loss.backward()` every call and `optimizer.step()` only every k-th call)."""
    for key, info in ctx.idx.functions.items():
        if not any(N.last_name(c.func) == "backward" for c in ctx.idx.calls.get(key, ())):
            continue
        level = _level(info.node.body)
        backward = _gated_step(ctx, info.node, info.key, level)
        if backward is not None:
            step = next(s for s, _ in level["step"])
            yield Hit(backward, message=f"{RULE.message} (`.step()` only on line {step.lineno})")


def _helper_syncs(ctx: FileContext) -> bool:
    """A call of a same-file or sibling-module helper that uses `no_sync` /
    `require_backward_grad_sync` (`with misc.ddp_sync(ddp, last_round):`)."""
    local = {
        key
        for key, info in ctx.idx.functions.items()
        if any(isinstance(n, ast.Attribute) and n.attr in _SYNC_ATTRS for n in ast.walk(info.node))
    }
    if local and any(ctx.callee(call) in local for call in ctx.idx.all_calls()):
        return True
    project = ctx.project
    return project is not None and any(
        project.mentions(ctx.path, module, func, _SYNC_ATTRS)
        for _, module, func in ctx.sibling_calls()
    )


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls or any(a in ctx.idx.attrs for a in _SYNC_ATTRS):
        return
    if "backward" not in ctx.idx.attrs:
        return
    hits = [hit for loop in ctx.idx.loops for hit in _accumulates(ctx, loop)]
    hits += _per_micro_step(ctx)
    if hits and not _helper_syncs(ctx):
        yield from hits
