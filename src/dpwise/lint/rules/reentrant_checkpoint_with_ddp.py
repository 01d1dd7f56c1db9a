"""DPW018 reentrant-checkpoint-with-ddp: reentrant activation checkpointing in a DDP script."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.loaders import keyword
from dpwise.lint.fix import cst
from dpwise.lint.model import UNSAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks DDP scripts (files that build a `DistributedDataParallel`, or scripts that start a process
group) for activation checkpointing that uses the reentrant variant:
`torch.utils.checkpoint.checkpoint(...)` / `checkpoint_sequential(...)` called without
`use_reentrant=False` (or with `use_reentrant=True`), and a model's
`gradient_checkpointing_enable()` called without `gradient_checkpointing_kwargs` (or with
`{"use_reentrant": True}`). A value the file computes (`use_reentrant=args.reentrant`), options
spread with `**`, and a framework's own `gradient_checkpointing_enable(use_reentrant=False)` are
not reported.

## Why is this bad?
The reentrant variant re-runs the checkpointed forward inside the backward pass, out of sight of
DDP's autograd hooks. Measured with torch 2.13 (CPU, gloo, two processes, a checkpointed
`Linear`): with `find_unused_parameters=True`, the backward fails with `RuntimeError: Expected to
mark a variable ready only once` (the error of huggingface/accelerate#389 and #3536); without it,
when the checkpoint's input does not require grad, the second step fails with `Expected to have
finished reduction in the prior iteration`. `use_reentrant=False` passed both. Without
`use_reentrant`, torch 2.13's `checkpoint` warns that the argument should be passed explicitly
and falls back to `use_reentrant=True`. `gradient_checkpointing_enable()` with no arguments
passes `use_reentrant=False` in transformers 5.24, but older transformers releases filled in
`{"use_reentrant": True}`: pass it explicitly so the script does not depend on the version. The
fix changes how the backward recomputes activations, so review it.

## Example
```python
from torch.utils.checkpoint import checkpoint

h = checkpoint(block, h)
model.gradient_checkpointing_enable()
```

## Use instead
```python
h = checkpoint(block, h, use_reentrant=False)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
```

## Fix (unsafe)
Passes `use_reentrant=False` (or sets `"use_reentrant": False` in the
`gradient_checkpointing_kwargs` dictionary). Unsafe: the backward then recomputes activations
another way (with different hooks and memory), which is the point, but wants a review.

## References
- https://github.com/huggingface/accelerate/issues/389
- https://github.com/huggingface/accelerate/issues/3536
- https://pytorch.org/docs/stable/checkpoint.html
"""

_TAIL = "under DDP the backward can fail with 'Expected to mark a variable ready only once'"

RULE = Rule(
    code="DPW018",
    name="reentrant-checkpoint-with-ddp",
    severity="warning",
    summary="activation checkpointing without `use_reentrant=False` in a DDP script",
    message="reentrant activation checkpointing: " + _TAIL,
    help="pass `use_reentrant=False` (for transformers: "
    '`gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})`)',
    docs=DOCS,
)

_CHECKPOINT = frozenset(
    {"torch.utils.checkpoint.checkpoint", "torch.utils.checkpoint.checkpoint_sequential"}
)


def _reentrant(value: ast.AST | None) -> bool:
    """Missing, None or True: the reentrant variant (or a version-dependent default)."""
    return value is None or (isinstance(value, ast.Constant) and value.value in (None, True))


def _kwargs_reentrant(value: ast.AST | None) -> bool:
    if value is None or (isinstance(value, ast.Constant) and value.value is None):
        return True
    if isinstance(value, ast.Dict):
        for key, item in zip(value.keys, value.values, strict=True):
            if key is not None and N.str_value(key) == "use_reentrant":
                return isinstance(item, ast.Constant) and item.value is True
        return True  # a dict without the key: the callee's default
    if isinstance(value, ast.Call) and N.last_name(value.func) == "dict":
        return _reentrant(keyword(value, "use_reentrant"))
    return False


def _spread(call: ast.Call) -> bool:
    """`f(..., **options)`: the options may hold `use_reentrant`."""
    return any(k.arg is None for k in call.keywords)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.is_ddp_script:
        return
    for call in ctx.calls_to(_CHECKPOINT):
        if _spread(call):
            continue
        given = keyword(call, "use_reentrant")
        if _reentrant(given):
            what = "without `use_reentrant=False`" if given is None else "with `use_reentrant=True`"
            yield Hit(
                call, message=f"`{N.last_name(call.func)}` {what}: {_TAIL}", data="checkpoint"
            )
    for call in ctx.calls_named("gradient_checkpointing_enable"):
        if _spread(call) or not _reentrant(keyword(call, "use_reentrant")):
            continue
        kwargs = keyword(call, "gradient_checkpointing_kwargs")
        if kwargs is None and call.args:
            kwargs = call.args[0]
        if _kwargs_reentrant(kwargs):
            yield Hit(
                call,
                message="`gradient_checkpointing_enable` without `use_reentrant: False`: " + _TAIL,
                data="enable",
            )


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    call = hit.node
    assert isinstance(call, ast.Call)
    if hit.data == "checkpoint":
        edit = cst.call_edit(
            ctx.text, call, lambda c: cst.with_keyword(c, "use_reentrant", "False")
        )
        return Fix(UNSAFE, "Pass `use_reentrant=False`", (edit,)) if edit else None
    kwargs = keyword(call, "gradient_checkpointing_kwargs")
    if kwargs is None and call.args:
        kwargs = call.args[0]
    if kwargs is None or (isinstance(kwargs, ast.Constant) and kwargs.value is None):
        value = '{"use_reentrant": False}'
        edit = cst.call_edit(
            ctx.text, call, lambda c: cst.with_keyword(c, "gradient_checkpointing_kwargs", value)
        )
    elif isinstance(kwargs, ast.Call):  # dict(use_reentrant=True)
        edit = cst.call_edit(
            ctx.text, kwargs, lambda c: cst.with_keyword(c, "use_reentrant", "False")
        )
    elif isinstance(kwargs, ast.Dict):
        edit = cst.dict_edit(ctx.text, kwargs, '"use_reentrant"', "False")
    else:
        return None
    message = 'Set `gradient_checkpointing_kwargs={"use_reentrant": False}`'
    return Fix(UNSAFE, message, (edit,)) if edit else None
