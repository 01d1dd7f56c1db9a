"""DPW013 deprecated-amp-api: `torch.cuda.amp.autocast` / `GradScaler`."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.fix import cst
from dpwise.lint.model import SAFE, UNSAFE, Edit, Fix, Hit, Rule

if TYPE_CHECKING:
    import libcst

DOCS = """\
## What it does
Checks for the device-specific AMP entry points that PyTorch has deprecated:
`torch.cuda.amp.autocast`, `torch.cuda.amp.GradScaler`, `torch.cuda.amp.custom_fwd` /
`custom_bwd`, `torch.cpu.amp.autocast` and `torch.cpu.amp.GradScaler`, however imported
(`from torch.cuda.amp import autocast, GradScaler` included). Each use is reported, not the import:
a call, a decorator, and the entry point taken as a value to be called later, bound to a name
(`autocast = torch.cuda.amp.autocast`, also one side of `... if fp16 else nullcontext`) or handed
to `functools.partial(torch.cuda.amp.autocast, dtype=...)` (reported without a fix: the calls
through it are elsewhere). A use inside the `except` of a `try` that already uses or imports
`torch.amp` is a fallback for older PyTorch and is not reported. Where it stops: the entry point
passed as an argument to any other function, or stored in a container, is not followed.

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

## Fix
Rewrites each use to `torch.amp`, with the device type the old entry point implied:
`torch.cuda.amp.autocast(args)` becomes `torch.amp.autocast("cuda", args)` (positional arguments
get their names, because the order of the parameters changed) and `GradScaler(args)` becomes
`GradScaler("cuda", args)`. For `from torch.cuda.amp import autocast, GradScaler`, the import
and every use of its names are rewritten together (offered only when every use is a call or a
decorator). Safe for `autocast` and `GradScaler`: the old entry points call the new ones with
exactly these arguments. Unsafe for `custom_fwd` / `custom_bwd`: `torch.amp.custom_fwd` needs
PyTorch 2.4.

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
        (isinstance(n, ast.Attribute | ast.Name) and (ctx.qual(n) or "").startswith("torch.amp."))
        or (isinstance(n, ast.ImportFrom) and n.module == "torch.amp")
        for stmt in body
        for n in ast.walk(stmt)
    )


def _fallback(ctx: FileContext, call: ast.AST) -> bool:
    """Inside the `except` of a `try` that already uses `torch.amp`: the old API is the fallback
    for a PyTorch without it."""
    handler = None
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.ExceptHandler):
            handler = parent
        elif handler in getattr(parent, "handlers", ()) and _uses_torch_amp(ctx, parent.body):  # type: ignore[attr-defined]  # a node with handlers is a try (Try, TryStar from 3.11): it has a body
            return True
    return False


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.calls_to(N.DEPRECATED_AMP):
        if _fallback(ctx, call):
            continue
        if isinstance(call.func, ast.Name) and call.func.id in ctx.value_aliases:
            continue  # a call through `autocast = torch.cuda.amp.autocast`: reported there
        yield _hit(call, ctx.qual(call.func))  # type: ignore[arg-type]  # calls_to found it by its qualified name
    for info in ctx.idx.functions.values():
        for decorator in info.node.decorator_list:
            q = ctx.qual(decorator)
            if q in N.DEPRECATED_AMP:
                yield _hit(decorator, q)
    for node, q in _passed_as_values(ctx):
        hit = _hit(node, q)
        yield Hit(hit.node, message=hit.message, help=hit.help, data=VALUE)


VALUE = "value"  # a deprecated entry point kept to be called later: reported, not fixed
_PARTIAL = frozenset({"functools.partial", "partial"})


def _passed_as_values(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """The deprecated API taken as a value to be called later: bound to a name
    (`autocast = torch.cuda.amp.autocast`, also one side of `... if fp16 else nullcontext`) or
    handed to `functools.partial(torch.cuda.amp.autocast, dtype=...)`."""
    if "amp" not in ctx.idx.attrs and not any("amp" in (i.module or "") for i in _froms(ctx)):
        return
    imported = ctx.names.aliases
    for node in ast.walk(ctx.tree):
        if not isinstance(node, ast.Attribute | ast.Name) or not isinstance(node.ctx, ast.Load):
            continue
        if (node.attr if isinstance(node, ast.Attribute) else node.id) not in _KINDS and not (
            isinstance(node, ast.Name) and node.id in imported
        ):
            continue  # cheap: only the entry points' own names, or a name an import binds
        q = ctx.qual(node)
        if q not in N.DEPRECATED_AMP:
            continue
        parent = ctx.idx.parents.get(node)
        while isinstance(parent, ast.IfExp):
            parent = ctx.idx.parents.get(parent)
        bound = isinstance(parent, ast.Assign | ast.AnnAssign | ast.NamedExpr)
        partial = (
            isinstance(parent, ast.Call)
            and node in parent.args[:1]
            and (ctx.qual(parent.func) or N.last_name(parent.func)) in _PARTIAL
        )
        if (bound or partial) and not _fallback(ctx, node):
            yield node, q


def _froms(ctx: FileContext) -> list[ast.ImportFrom]:
    return [i for i in ctx.idx.imports if isinstance(i, ast.ImportFrom)]


_FROM = re.compile(r"from\s+torch\s*\.\s*(cuda|cpu)\s*\.\s*amp\b")
_AUTOCAST_PARAMS = ("enabled", "dtype", "cache_enabled")  # torch.cuda.amp.autocast's order


def _parts(q: str) -> tuple[str, str]:
    """'torch.cuda.amp.autocast_mode.autocast' -> ('cuda', 'autocast')."""
    return q.split(".")[1], q.rsplit(".", 1)[1]


def _arguments(call: libcst.Call, device: str, kind: str) -> libcst.Call | None:
    """The old call's arguments in the new entry point's terms."""
    if kind == "autocast":
        named = cst.positional_as_keywords(call, _AUTOCAST_PARAMS)
        return cst.with_first(named, f'"{device}"') if named is not None else None
    if kind == "GradScaler":
        return cst.with_first(call, f'"{device}"')
    return cst.with_keyword(call, "device_type", f'"{device}"')  # custom_fwd / custom_bwd


def _use_edit(
    ctx: FileContext, node: ast.AST, device: str, kind: str, func: str | None
) -> Edit | None:
    """A call or decorator rewritten; `func` replaces the callee's name when given."""
    if not isinstance(node, ast.Call):  # a bare decorator: `@custom_fwd`
        return ctx.text.replace(node, f'{func or ctx.text.segment(node)}(device_type="{device}")')

    def rewrite(call: libcst.Call) -> libcst.Call | None:
        new = _arguments(call, device, kind)
        return cst.with_func(new, func) if new is not None and func else new

    return cst.call_edit(ctx.text, node, rewrite)


def _root(expr: ast.AST) -> ast.AST:
    while isinstance(expr, ast.Attribute):
        expr = expr.value
    return expr


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    if hit.data == VALUE:
        return None
    node = hit.node
    func = node.func if isinstance(node, ast.Call) else node
    q = ctx.qual(func)
    if q is None:
        return None
    device, kind = _parts(q)
    applicability = SAFE if kind in ("autocast", "GradScaler") else UNSAFE
    message = f"Use `torch.amp.{kind}` with device type `{device}`"
    root = _root(func)
    if isinstance(root, ast.Name) and ctx.names.base(root.id) == "torch":
        edit = _use_edit(ctx, node, device, kind, f"{root.id}.amp.{kind}")
        return Fix(applicability, message, (edit,)) if edit else None
    edits = _from_import_edits(ctx, func)
    if not edits:
        return None
    unsafe = any("device_type" in e.content for e in edits)
    message = "Import from `torch.amp` and pass the device type at every use"
    return Fix(UNSAFE if unsafe else SAFE, message, edits)


def _from_import_edits(ctx: FileContext, func: ast.AST) -> tuple[Edit, ...] | None:
    """`from torch.cuda.amp import autocast, GradScaler`: every such import and every use of the
    names they bind, rewritten together (or nothing: when a name is used other than called or as
    a decorator, bound another way too, or imported for two devices)."""
    if not isinstance(func, ast.Name):
        return None
    group = _binding(ctx, {func.id})
    if group is None:
        return None
    devices = {i.module.split(".")[1] for i in group}  # type: ignore[union-attr]  # _binding keeps `from torch.*.amp import` lines only
    local = {a.asname or a.name: a.name for i in group for a in i.names}
    if len(devices) != 1 or any(name not in _KINDS for name in local.values()):
        return None
    if set(local) & ctx.idx.bound:  # also assigned or defined in the file
        return None
    (device,) = devices
    edits: list[Edit] = []
    for use in _uses(ctx, set(local)):
        if use is None:
            return None
        name = use.func.id if isinstance(use, ast.Call) else use.id  # type: ignore[attr-defined]  # a use is a call of the Name found, or that Name (_uses)
        edit = _use_edit(ctx, use, device, local[name], None)
        if edit is None:
            return None
        edits.append(edit)
    for stmt in group:
        match = _FROM.match(ctx.text.segment(stmt))
        if match is None:
            return None
        line, col = ctx.text.start(stmt)
        edits.append(Edit(line, col, line, col + match.end(), "from torch.amp"))
    return tuple(sorted(edits))


_OLD_MODULES = ("torch.cuda.amp", "torch.cpu.amp")


def _binding(ctx: FileContext, names: set[str]) -> list[ast.ImportFrom] | None:
    """The imports that bind these names, and those that bind the other names they import, and
    so on; None unless every one is a `from torch.cuda.amp import ...` (or `torch.cpu.amp`)."""
    group: list[ast.ImportFrom] = []
    while True:
        more = [
            i
            for i in ctx.idx.imports
            if i not in group and any((a.asname or a.name) in names for a in i.names)
        ]
        if not more:
            return group or None
        for i in more:
            if not (isinstance(i, ast.ImportFrom) and i.level == 0 and i.module in _OLD_MODULES):
                return None
            group.append(i)
            names |= {a.asname or a.name for a in i.names}


_KINDS = ("autocast", "GradScaler", "custom_fwd", "custom_bwd")


def _uses(ctx: FileContext, names: set[str]) -> list[ast.AST | None]:
    """Each use of the names: the call, or the bare decorator; None for any other use."""
    nodes = list(ast.walk(ctx.tree))
    decorators = {id(d) for node in nodes for d in getattr(node, "decorator_list", ())}
    called = {id(n.func): n for n in nodes if isinstance(n, ast.Call)}
    return [
        called.get(id(node)) or (node if id(node) in decorators else None)
        for node in nodes
        if isinstance(node, ast.Name) and node.id in names
    ]
