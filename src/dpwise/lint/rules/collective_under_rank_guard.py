"""DPW017 collective-under-rank-guard: a collective, or a DDP forward, that only rank 0 runs."""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.batchnorm import uses_batchnorm
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.guards import NOT_RANK0, RANK0, Guards, classify
from dpwise.lint.analysis.index import MODULE, pos
from dpwise.lint.analysis.wrappers import Wrappers
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks for a collective of `torch.distributed` (`barrier`, `all_reduce`, `broadcast`,
`all_gather`, `reduce`, `gather`, `scatter`, their `_object` variants, `monitored_barrier`,
`new_group`) or Accelerate's `wait_for_everyone()`, and for a forward pass of a
`DistributedDataParallel` model, inside a rank-0-only branch: `if rank == 0:`,
`if is_main_process():`, the rest of a block after `if rank != 0: return`, or a function
whose every same-file call is so guarded (the guards of `unguarded-rank-side-effect`).
Point-to-point `send` / `recv` are not collectives. Not reported: a collective that the same
function also makes on the other ranks, in the `else:` of the rank-0 branch or under
`if rank != 0:` (the "rank 0 goes first" barrier pair: the other ranks wait at
`if rank != 0: dist.barrier()` while rank 0 downloads, then rank 0 releases them with
`if rank == 0: dist.barrier()`, also when both tests add a condition such as
`and not evaluate`), and a collective inside `with pytest.raises(...)` or
`with self.assertRaises(...)` (a test of the timeout).

## Why is this bad?
A collective completes only when every rank of the group joins it. Rank 0 waits in it for peers
that never arrive, and the job hangs until the collective's timeout, with no error pointing at
the line. A DDP model's forward pass can be a collective too: once the model has trained, DDP
broadcasts the module's buffers (BatchNorm's running statistics, any `register_buffer`) from
rank 0 at the start of each forward (`broadcast_buffers=True`, the default), even under
`torch.no_grad()` (pytorch/pytorch#54059; calling `model.module(data)` for the rank-0
evaluation avoided the hang there). Measured with torch 2.13 (CPU, gloo, two processes, one
training step, then a `torch.no_grad()` forward on rank 0 only and a barrier): with a BatchNorm
in the model both ranks timed out; a plain `Linear` (no buffers) finished. dpwise cannot see the
buffers at run time: a forward of the wrapper on rank 0 alone is reported where the file, or a
project module it imports (the model defined in `resnet.py` beside it), shows buffers (BatchNorm
layers, `register_buffer`) and the file leaves `broadcast_buffers` on; a buffer-less model
evaluated on rank 0 (a common, working pattern) is not.

## Example
```python
if rank == 0:
    val_loss = evaluate(model(x_val), y_val)
    dist.barrier()
```

## Use instead
```python
dist.barrier()  # every rank
if rank == 0:
    val_loss = evaluate(model.module(x_val), y_val)  # the unwrapped model
```

## References
- https://github.com/pytorch/pytorch/issues/54059
- https://pytorch.org/docs/stable/distributed.html#collective-functions
"""

RULE = Rule(
    code="DPW017",
    name="collective-under-rank-guard",
    severity="error",
    summary="a collective (or a DDP forward pass) runs on rank 0 only: the other ranks never join",
    message="collective on rank 0 only: the other ranks never join and the job hangs",
    help="run the collective on every rank (move it out of the rank-0 branch); evaluate "
    "`model.module(...)` rather than the DDP wrapper on rank 0",
    docs=DOCS,
)

_COLLECTIVES = frozenset(
    {"barrier", "monitored_barrier", "all_reduce", "all_gather", "all_gather_object"}
    | {"all_gather_into_tensor", "all_to_all", "all_to_all_single", "broadcast"}
    | {"broadcast_object_list", "reduce", "reduce_scatter", "reduce_scatter_tensor", "gather"}
    | {"gather_object", "scatter", "scatter_object_list", "new_group"}
)
_QUALS = frozenset(f"torch.distributed.{name}" for name in _COLLECTIVES)
_METHODS = frozenset({"wait_for_everyone"})


_BUFFER_WORDS = ("BatchNorm", "register_buffer")


def _broadcasts_buffers(ctx: FileContext) -> bool:
    """The file, or a project module it imports (the model defined in `resnet.py` beside it),
    shows buffers DDP would broadcast in forward, and the file does not turn that off."""
    if "broadcast_buffers" in ctx.source and "broadcast_buffers=True" not in ctx.source:
        return False
    if "register_buffer" in ctx.idx.attrs or uses_batchnorm(ctx):
        return True
    project = ctx.project
    return project is not None and project.imported_source_mentions(ctx, _BUFFER_WORDS)


def _what(
    ctx: FileContext, wrappers: Wrappers, call: ast.Call, buffers: Callable[[], bool]
) -> str | None:
    q = ctx.qual(call.func)
    if q in _QUALS:
        return f"`{q.rsplit('.', 1)[1]}`"
    if isinstance(call.func, ast.Attribute) and call.func.attr in _METHODS:
        return f"`{call.func.attr}()`"
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr == "forward":
        func = func.value
    if isinstance(func, ast.Name | ast.Attribute):
        kind = wrappers.kind(func, ctx.scope(call), pos(call))
        if kind == "DistributedDataParallel" and buffers():
            return "a forward pass of the DDP model (it broadcasts the model's buffers)"
    return None


def _true_off_rank0(test: ast.AST, aliases: frozenset[str]) -> bool:
    """The test holds only on ranks other than 0: `rank != 0`, and also a conjunction with
    another condition (`local_rank not in (-1, 0) and not evaluate`)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(_true_off_rank0(v, aliases) for v in test.values)
    return classify(test, aliases) == NOT_RANK0


def _other_ranks(ctx: FileContext, guards: Guards, call: ast.Call) -> bool:
    """Runs on the ranks other than 0 only: under `if rank != 0:`, or a rank-0 test's `else:`."""
    child: ast.AST = call
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.If):
            kind = classify(parent.test, guards.aliases)
            off_rank0 = _true_off_rank0(parent.test, guards.aliases)
            if (off_rank0 and child in parent.body) or (kind == RANK0 and child in parent.orelse):
                return True
        child = parent
    return False


def _paired(ctx: FileContext, guards: Guards, call: ast.Call) -> bool:
    """The same function makes the same collective on the other ranks: the barrier pair of
    `if rank != 0: barrier()` ... `if rank == 0: barrier()` (rank 0 goes first), or an `else:`."""
    name = N.last_name(call.func)
    return any(
        other is not call and N.last_name(other.func) == name and _other_ranks(ctx, guards, other)
        for other in ctx.idx.calls.get(ctx.scope(call), ())
    )


def _rank0_only(
    ctx: FileContext, guards: Guards, scope: str, node: ast.AST, seen: frozenset[str]
) -> bool:
    """Under a rank-0 guard in its function, or every same-file call of the function is (all
    callers known: a function called from nowhere in this file, or recursively, is not)."""
    if guards.local(scope, node):
        return True
    if scope == MODULE or scope in seen or ctx.spawned.get(scope):
        return False
    sites = ctx.callers.get(scope)
    if not sites:
        return False
    return all(_rank0_only(ctx, guards, caller, call, seen | {scope}) for caller, call in sites)


def _expected_to_fail(ctx: FileContext, call: ast.Call) -> bool:
    """Inside `with self.assertRaises(...)` / `pytest.raises(...)`: a test of the timeout."""
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.With | ast.AsyncWith):
            for item in parent.items:
                expr = item.context_expr
                name = N.last_name(expr.func) if isinstance(expr, ast.Call) else ""
                if name == "raises" or name.startswith("assertRaises"):
                    return True
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.is_ddp_script:
        return
    guards = Guards(ctx)
    guards.parent_only = False  # a spawning parent's collectives are its own concern
    wrappers = Wrappers(ctx)
    buffers = functools.cache(lambda: _broadcasts_buffers(ctx))  # once per file, on demand
    for call in ctx.idx.all_calls():
        what = _what(ctx, wrappers, call, buffers)
        if what is None or not _rank0_only(ctx, guards, ctx.scope(call), call, frozenset()):
            continue
        if _paired(ctx, guards, call) or _expected_to_fail(ctx, call):
            continue
        yield Hit(
            call,
            message=f"{what} runs on rank 0 only: the other ranks never join and the job hangs",
        )
