"""DPW010 wrapped-state-dict: saving a DDP / DataParallel wrapper's state dict."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import assign_targets, pos
from dpwise.lint.analysis.wrappers import Wrappers
from dpwise.lint.model import UNSAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks for `model.state_dict()` where `model` holds a `DistributedDataParallel` or `DataParallel`
wrapper, when the result is saved (`torch.save(model.state_dict(), ...)`, a dict or variable that is
later passed to `torch.save` or `safetensors.torch.save_file`, an argument of a same-file function
that saves, or of another module's helper named like a saver such as `save_on_master(...)` or
`utils.save_checkpoint(...)`) or returned. The help names the expression the file uses
(`net.module.state_dict()`).
The wrapper is followed through assignments (`model = DDP(model)`), through
`self.model = DDP(...)` in a class, and into same-file functions through their parameters
(`save_checkpoint(ddp_model, ...)`), and into nested functions that use the enclosing
function's variable (a `def save_checkpoint(epoch):` closure inside `main`, where it takes the
variable's last value in `main`; a `nonlocal` rebinding inside the closure is not followed).
`model.module.state_dict()` is what it should be and is not
reported; neither is a name unwrapped where the model may be wrapped
(`g = generator.module if distributed else generator`, or the same as an `if`/`else`). A
conditional expression with the wrapper on one side is the wrapper on that path
(`save_model = ema.module if use_ema else self.model` saves the wrapper without EMA).

## Why is this bad?
The wrapper holds the model as `.module`, so every key gets a `module.` prefix
(`module.fc1.weight`). Loading the file into the plain model fails with missing and unexpected keys,
or needs the prefix stripped by hand; the checkpoint also depends on how it was trained.

## Example
```python
model = DDP(model, device_ids=[local_rank])
torch.save(model.state_dict(), "model.pt")
```

## Use instead
```python
model = DDP(model, device_ids=[local_rank])
torch.save(model.module.state_dict(), "model.pt")
```

## Fix (unsafe)
Saves `model.module.state_dict()`; where the file wraps the model only on some paths (under an
`if`), `getattr(model, "module", model).state_dict()`, which is right either way. Unsafe: the
saved keys lose their `module.` prefix, so code that loads the old files into a wrapper must load
into the unwrapped model (`model.module.load_state_dict(...)`) instead.

## References
- https://pytorch.org/tutorials/intermediate/ddp_tutorial.html (save and load checkpoints)
"""

RULE = Rule(
    code="DPW010",
    name="wrapped-state-dict",
    severity="warning",
    summary="the state dict of a DDP / DataParallel wrapper is saved (keys get a `module.` prefix)",
    message="saves the state dict of a wrapper: every key gets a `module.` prefix",
    help="save `model.module.state_dict()` (the unwrapped model)",
    docs=DOCS,
)

SAVES = frozenset({"torch.save", "safetensors.torch.save_file", "safetensors.torch.save_model"})


def _saves(ctx: FileContext, call: ast.Call) -> bool:
    q = ctx.qual(call.func)
    if q in SAVES:
        return True
    key = ctx.callee(call)
    if key is not None:
        return any(ctx.qual(c.func) in SAVES for c in ctx.idx.calls.get(key, ()))
    return _save_helper(q, N.last_name(call.func))


def _save_helper(qual: str | None, name: str) -> bool:
    """A call into another module named like a saver (`save_on_master(...)`,
    `utils.save_checkpoint(...)`): a helper that writes what it is given."""
    if (qual or "").startswith(("torch.", "numpy.", "np.")):
        return False
    return name.lower().startswith("save")


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _later_saved(ctx: FileContext, scope: str, stmt: ast.stmt, names: set[str]) -> bool:
    after = pos(stmt)
    if any(pos(c) > after and _saves(ctx, c) and _uses(c, names) for c in ctx.idx.calls[scope]):
        return True
    fn = ctx.function_node(scope)
    return any(
        isinstance(n, ast.Return) and n.value is not None and _uses(n.value, names)
        for n in ast.walk(fn)
    )


def _assigned_names(stmt: ast.stmt) -> set[str]:
    targets = assign_targets(stmt)
    names = set()
    for target in targets:
        while isinstance(target, ast.Subscript | ast.Attribute):
            target = target.value
        if isinstance(target, ast.Name):
            names.add(target.id)
    return names


def _kept(ctx: FileContext, call: ast.Call) -> bool:
    """Is the state dict saved or returned?"""
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.Call) and _saves(ctx, parent):
            return True
        if isinstance(parent, ast.Return):
            return True
        if isinstance(parent, ast.Assign | ast.AnnAssign):
            names = _assigned_names(parent)
            return bool(names) and _later_saved(ctx, ctx.scope(call), parent, names)
        if isinstance(parent, ast.stmt):
            return False
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.ddp_calls and not ctx.calls_to(N.DATA_PARALLEL):
        return
    wrappers = Wrappers(ctx)
    for call in ctx.calls_named("state_dict"):
        func = call.func
        if not isinstance(func, ast.Attribute) or call.args:
            continue
        kind = wrappers.kind(func.value, ctx.scope(call), pos(call))
        if kind and _kept(ctx, call):
            yield Hit(
                call,
                message=f"saves the state dict of a `{kind}` wrapper: every key gets a "
                "`module.` prefix",
                help=f"save `{_shown(func.value)}.module.state_dict()` (the unwrapped model)",
            )


def _shown(expr: ast.AST) -> str:
    text = ast.unparse(expr)
    return text if len(text) <= 40 and "\n" not in text else "model"


def _sometimes_wrapped(ctx: FileContext) -> bool:
    """Is any wrapper built under an `if` (or a conditional expression)?"""
    built = [*ctx.ddp_calls, *ctx.calls_to(N.DATA_PARALLEL)]
    return any(
        isinstance(parent, ast.If | ast.IfExp) for call in built for parent in ctx.ancestors(call)
    )


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    receiver = hit.node.func.value  # type: ignore[attr-defined]  # the rule reports method calls: `x.state_dict()`
    text = ctx.text.segment(receiver)
    simple = isinstance(receiver, ast.Name | ast.Attribute)
    if simple and _sometimes_wrapped(ctx):
        unwrapped = f'getattr({text}, "module", {text})'
    elif simple or isinstance(receiver, ast.Subscript | ast.Call):
        unwrapped = f"{text}.module"
    else:
        unwrapped = f"({text}).module"
    if "\n" in text or "\r" in text:
        return None
    shown = _shown(receiver)
    edit = ctx.text.replace(receiver, unwrapped)
    return Fix(UNSAFE, f"Save the unwrapped model's state dict (`{shown}.module`)", (edit,))
