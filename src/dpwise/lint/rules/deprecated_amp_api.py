"""DPW013 deprecated-amp-api: `torch.cuda.amp.autocast` / `GradScaler`."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint import names as N
from dpwise.lint.analysis import FileContext
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks for the device-specific AMP entry points that PyTorch has deprecated:
`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd` /
`custom_bwd`, `torch.cpu.amp.autocast` and `torch.cpu.amp.GradScaler`, however imported
(`from torch.cuda.amp import autocast, GradScaler` included). Each use is reported, not the import.
A use inside the `except` of a `try` that already uses `torch.amp` is a fallback for older PyTorch
and is not reported.

## Why is this bad?
They emit a `FutureWarning` ("`torch.cuda.amp.autocast(args...)` is deprecated. Please use
`torch.amp.autocast('cuda', args...)` instead.") and are kept only for compatibility. The
`torch.amp` versions take the device type as an argument and work the same on every device.
(The guide's "Use torch.cuda.amp.autocast with a single GradScaler per process" predates this.)

## Example
```python
scaler = torch.cuda.amp.GradScaler()
with torch.cuda.amp.autocast():
    loss = model(x)
```

## Use instead
```python
scaler = torch.amp.GradScaler("cuda")
with torch.amp.autocast("cuda"):
    loss = model(x)
```

## References
- https://pytorch.org/docs/stable/amp.html
"""

RULE = Rule(
    code="DPW013",
    name="deprecated-amp-api",
    severity="warning",
    summary="`torch.cuda.amp.autocast` / `torch.cuda.amp.GradScaler` are deprecated",
    message="`torch.cuda.amp` is deprecated (PyTorch emits a FutureWarning)",
    help='use `torch.amp.autocast("cuda", ...)` and `torch.amp.GradScaler("cuda", ...)`',
    docs=DOCS,
)


def _short(q: str) -> str:
    return q.replace(".autocast_mode.", ".").replace(".grad_scaler.", ".")


def _hit(node: ast.AST, q: str) -> Hit:
    instead = N.DEPRECATED_AMP[q]
    return Hit(
        node,
        message=f"`{_short(q)}` is deprecated (PyTorch emits a FutureWarning)",
        help=f"use `{instead}`",
    )


def _uses_torch_amp(ctx: FileContext, body: list[ast.stmt]) -> bool:
    return any(
        isinstance(n, ast.Attribute | ast.Name) and (ctx.qual(n) or "").startswith("torch.amp.")
        for stmt in body
        for n in ast.walk(stmt)
    )


def _fallback(ctx: FileContext, call: ast.Call) -> bool:
    """Inside the `except` of a `try` that already uses `torch.amp`: the old API is the fallback
    for a PyTorch without it."""
    handler = None
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.ExceptHandler):
            handler = parent
        elif handler in getattr(parent, "handlers", ()) and _uses_torch_amp(ctx, parent.body):  # type: ignore[attr-defined]
            return True
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.calls_to(N.DEPRECATED_AMP):
        if _fallback(ctx, call):
            continue
        yield _hit(call, ctx.qual(call.func))  # type: ignore[arg-type]
    for info in ctx.idx.functions.values():
        for decorator in info.node.decorator_list:
            q = ctx.qual(decorator)
            if q in N.DEPRECATED_AMP:
                yield _hit(decorator, q)
