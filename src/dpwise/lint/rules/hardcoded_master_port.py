"""DPW008 hardcoded-master-port: `MASTER_PORT` set to a literal."""

from __future__ import annotations

import ast
import ipaddress
import re
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import MODULE
from dpwise.lint.analysis.loaders import assigned_values, keyword
from dpwise.lint.model import UNSAFE, Edit, Fix, Hit, Rule

DOCS = """\
## What it does
Checks for `MASTER_PORT` set to a literal: `os.environ["MASTER_PORT"] = "29500"` (a string, an int,
`str(29500)`, a module-level constant such as `PORT = "12355"`, or a parameter's literal default
that no call in the file overrides: `def init_distributed(port=40112):`),
`os.environ.update(MASTER_PORT="29500")` / `os.environ.update({"MASTER_PORT": "29500"})`, and a
literal port in `init_process_group(init_method="tcp://host:23456")`, also when the literal
reaches `init_method` through a variable (`url = f"tcp://{host}:{port}"` with `port = 23456`, or
`"tcp://host:" + str(port)`) or through an `args.` attribute whose
`add_argument(..., default=...)` is a literal (`--dist-url` defaulting to
`"tcp://127.0.0.1:23456"`, `--port` defaulting to `29500`) or that the file sets to one
(`args.dist_url = f"tcp://{host}:58472"` before spawning the workers).

A URL whose host no job can meet at is not reported: a multicast or reserved address
(224.0.0.0/3; PyTorch's ImageNet example defaults `--dist-url` to `tcp://224.66.41.62:23456`) or a
documentation one (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24). Such a default is a
placeholder the user must replace whole, port included, to run at all; a loopback, private or
public address, or a host name, runs unchanged and is reported.

`os.environ.setdefault("MASTER_PORT", "29500")`, `os.environ.get("MASTER_PORT", "29500")` and an
assignment under `if "MASTER_PORT" not in os.environ:` are not reported: they only supply a
default that the launcher or the user can override through the environment, which is the fix this
rule asks for.

## Why is this bad?
The rendezvous port is per node, not per job. A second job on the same node (a sweep, a colleague,
a test run that did not exit) binds the same port: the new job fails with `EADDRINUSE`, or worse,
its workers join the other job's rendezvous and hang.

## Example
```python
os.environ["MASTER_ADDR"] = "127.0.0.1"
os.environ["MASTER_PORT"] = "29500"
```

## Use instead
```python
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", str(free_port()))
```
Or launch with `torchrun --standalone`, which picks a free port and sets `MASTER_PORT` itself.

## Fix (unsafe)
Keeps the literal as a default the environment can override: `os.environ["MASTER_PORT"] = "29500"`
becomes `os.environ.setdefault("MASTER_PORT", "29500")`, and a literal `"tcp://host:23456"` (in
the call, in a variable, or in the `add_argument` default it comes from) becomes
`f"tcp://host:{os.environ.get('MASTER_PORT', '23456')}"` (adding `import os` if the file has
none). Unsafe: a `MASTER_PORT` already in the environment now wins over the literal.
"""

RULE = Rule(
    code="DPW008",
    name="hardcoded-master-port",
    severity="warning",
    summary="`MASTER_PORT` is set to a literal (collides with the next job on the node)",
    message="`MASTER_PORT` is set to a literal: the next job on this node collides with it",
    help="pick a free port (bind port 0 and read it back), keep a value from the environment "
    "(`os.environ.setdefault`), or use `torchrun --standalone`",
    docs=DOCS,
)

_TCP = re.compile(r"^tcp://.*:\d+$")


def _constant(ctx: FileContext, expr: ast.AST, scope: str = MODULE) -> bool:
    if isinstance(expr, ast.Constant):
        return isinstance(expr.value, int | str) and str(expr.value).strip().isdigit()
    if isinstance(expr, ast.JoinedStr):
        return all(_constant(ctx, v, scope) for v in expr.values)
    if isinstance(expr, ast.FormattedValue):
        return _constant(ctx, expr.value, scope)
    if isinstance(expr, ast.Call) and N.last_name(expr.func) == "str" and len(expr.args) == 1:
        return _constant(ctx, expr.args[0], scope)
    if isinstance(expr, ast.Name) and _param(ctx, scope, expr.id):
        default = _param_default(ctx, scope, expr.id)
        return default is not None and _constant(ctx, default)
    if isinstance(expr, ast.Name) and expr.id.isupper():
        values = [
            s.value
            for s in ctx.idx.assigns.get(MODULE, ())
            if isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == expr.id for t in s.targets)
        ]
        return len(values) == 1 and _constant(ctx, values[0])
    return False


def _only_if_unset(ctx: FileContext, stmt: ast.stmt) -> bool:
    """Under `if "MASTER_PORT" not in os.environ:`: a default, like `setdefault`."""
    return any(
        isinstance(p, ast.If) and any(N.str_value(n) == "MASTER_PORT" for n in ast.walk(p.test))
        for p in ctx.ancestors(stmt)
    )


def _environ_writes(ctx: FileContext) -> Iterator[tuple[ast.AST, ast.AST, str]]:
    """(node to report, value, scope) for every `MASTER_PORT` assignment."""
    for node in ctx.idx.environ:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            parent = ctx.idx.parents.get(node)
            if (
                N.str_value(node.slice) == "MASTER_PORT"
                and isinstance(parent, ast.Assign)
                and not _only_if_unset(ctx, parent)
            ):
                yield parent, parent.value, ctx.scope(parent)
    for call in ctx.calls_to({"os.environ.update"}):
        for k in call.keywords:
            if k.arg == "MASTER_PORT":
                yield k, k.value, ctx.scope(call)
        for arg in call.args:
            if isinstance(arg, ast.Dict):
                for key, value in zip(arg.keys, arg.values, strict=True):
                    if key is not None and N.str_value(key) == "MASTER_PORT":
                        yield key, value, ctx.scope(call)


def _init_methods(ctx: FileContext) -> Iterator[tuple[ast.AST, str]]:
    """(init_method, scope of the call) for a TCP `init_method` with a literal port on an
    address a job could run with unchanged."""
    for call in ctx.init_calls:
        method = keyword(call, "init_method") or (call.args[1] if len(call.args) > 1 else None)
        if method is None:
            continue
        texts = _texts(ctx, method, ctx.scope(call))
        if any(_TCP.match(t) and not _placeholder(t) for t in texts):
            yield method, ctx.scope(call)


# Addresses no job can rendezvous at: multicast and reserved (224.0.0.0/3, which PyTorch's
# ImageNet example uses as its --dist-url default, tcp://224.66.41.62:23456) and the
# documentation ranges (RFC 5737). A URL on one must be replaced whole by the user, port included.
_NOWHERE = [ipaddress.ip_network(n) for n in ("224.0.0.0/3", "192.0.2.0/24", "198.51.100.0/24",
                                                "203.0.113.0/24")]  # fmt: skip


def _placeholder(url: str) -> bool:
    """`tcp://HOST:PORT` whose host is an address nobody can run the job with unchanged."""
    host = url[len("tcp://") :].rsplit(":", 1)[0].strip("[]")
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a host name, or a part that cannot be told ({}): reported
    return address.version == 4 and any(address in net for net in _NOWHERE)


def _texts(ctx: FileContext, expr: ast.AST, scope: str) -> list[str]:
    """What `expr` may evaluate to: for `args.dist_url`, each value the file assigns to a
    `.dist_url` attribute (`args.dist_url = f"tcp://{host}:58472"`) besides its argparse default."""
    found = [_text(ctx, expr, scope)]
    if isinstance(expr, ast.Attribute):
        for where, stmts in ctx.idx.assigns.items():
            for stmt in stmts:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Attribute) and t.attr == expr.attr for t in stmt.targets
                ):
                    found.append(_text(ctx, stmt.value, where))
    return found


def _text(ctx: FileContext, expr: ast.AST, scope: str, depth: int = 0) -> str:
    """The string `expr` evaluates to, with `{}` for the parts that cannot be told: literals,
    f-strings, `+`, `str(...)`, a name assigned once (in the function or at module level) and
    `args.x` whose `add_argument("--x", default=...)` is in the file."""
    if depth > 4:
        return "{}"
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str | int):
        return str(expr.value)
    if isinstance(expr, ast.JoinedStr):
        return "".join(_text(ctx, v, scope, depth + 1) for v in expr.values)
    if isinstance(expr, ast.FormattedValue):
        return _text(ctx, expr.value, scope, depth + 1)
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        return _text(ctx, expr.left, scope, depth + 1) + _text(ctx, expr.right, scope, depth + 1)
    if isinstance(expr, ast.Call) and N.last_name(expr.func) == "str" and len(expr.args) == 1:
        return _text(ctx, expr.args[0], scope, depth + 1)
    if isinstance(expr, ast.Name) and not _param(ctx, scope, expr.id):
        for where in dict.fromkeys((scope, MODULE)):
            values = list(assigned_values(ctx, where, expr.id))
            if values:
                return _text(ctx, values[0], where, depth + 1) if len(values) == 1 else "{}"
    if isinstance(expr, ast.Attribute):
        default = _argument_default(ctx, expr.attr)
        if default is not None:
            return _text(ctx, default, MODULE, depth + 1)
    return "{}"


def _param_default(ctx: FileContext, scope: str, name: str) -> ast.AST | None:
    """The default of parameter `name` when no same-file call passes it and the function never
    reassigns it (`def init_distributed(port=40112):` called as `init_distributed()`)."""
    info = ctx.idx.functions[scope]
    args = info.node.args
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    pairs = list(zip(with_default, args.defaults, strict=True))
    pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d]
    default = next((d for a, d in pairs if a.arg == name), None)
    if default is None or any(assigned_values(ctx, scope, name)):
        return None
    index = info.params.index(name)
    for _, call in ctx.callers.get(scope, ()):
        if any(k.arg in (name, None) for k in call.keywords) or len(call.args) > index:
            return None
    return default


def _param(ctx: FileContext, scope: str, name: str) -> bool:
    info = ctx.idx.functions.get(scope)
    return info is not None and name in info.params


def _argument_default(ctx: FileContext, dest: str) -> ast.AST | None:
    """The `default=` of the file's one `add_argument` whose destination is `dest`."""
    found = []
    for call in ctx.calls_named("add_argument"):
        flags = [N.str_value(a) or "" for a in call.args]
        named = N.str_value(keyword(call, "dest")) if keyword(call, "dest") else None
        longs = [
            f.lstrip("-").replace("-", "_") for f in flags if f.startswith("--") or f[:1].isalpha()
        ]
        if (named or (longs[0] if longs else None)) == dest:
            found.append(keyword(call, "default"))
    return found[0] if len(found) == 1 else None


def check(ctx: FileContext) -> Iterator[Hit]:
    for node, value, scope in _environ_writes(ctx):
        if _constant(ctx, value, scope):
            yield Hit(node, data="environ")
    for node, scope in _init_methods(ctx):
        yield Hit(
            node,
            message="`init_method` has a literal TCP port: the next job on this node "
            "collides with it",
            data=scope,
        )


_PLAIN = re.compile(r"""^(?P<q>["'])(?P<url>tcp://[^"'{}\\]*:)(?P<port>\d+)(?P=q)$""")


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    if hit.data == "environ":
        return _setdefault(ctx, hit.node)
    literal = _literal(ctx, hit.node, hit.data)
    match = _PLAIN.match(ctx.text.segment(literal)) if literal is not None else None
    if literal is None or match is None:
        return None
    os_name, import_edit = _os(ctx)
    if os_name is None:
        return None
    q, port = match["q"], match["port"]
    other = "'" if q == '"' else '"'
    lookup = f"{os_name}.environ.get({other}MASTER_PORT{other}, {other}{port}{other})"
    edit = ctx.text.replace(literal, f"f{q}{match['url']}{{{lookup}}}{q}")
    message = f"Read the port from `MASTER_PORT`, {port} by default"
    return Fix(UNSAFE, message, tuple(sorted(e for e in (edit, import_edit) if e)))


def _setdefault(ctx: FileContext, stmt: ast.AST) -> Fix | None:
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1):
        return None
    target = stmt.targets[0]
    if not isinstance(target, ast.Subscript):
        return None
    value = stmt.value
    shown = ctx.text.segment(value)
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        shown = f'"{value.value}"'  # an int in os.environ raises TypeError
    environ, key = ctx.text.segment(target.value), ctx.text.segment(target.slice)
    edit = ctx.text.replace(stmt, f"{environ}.setdefault({key}, {shown})")
    return Fix(UNSAFE, "Use `os.environ.setdefault` (the environment can override it)", (edit,))


def _literal(ctx: FileContext, expr: ast.AST, scope: str) -> ast.Constant | None:
    """The string literal the `init_method` comes from: itself, a name assigned it once, or an
    `args.` attribute's `add_argument` default."""
    if isinstance(expr, ast.Name) and not _param(ctx, scope, expr.id):
        for where in dict.fromkeys((scope, MODULE)):
            values = list(assigned_values(ctx, where, expr.id))
            if values:
                expr = values[0] if len(values) == 1 else expr
                break
    elif isinstance(expr, ast.Attribute):
        expr = _argument_default(ctx, expr.attr) or expr
    return expr if isinstance(expr, ast.Constant) and isinstance(expr.value, str) else None


def _os(ctx: FileContext) -> tuple[str | None, Edit | None]:
    """The name `os` is imported as, or `os` with the edit that imports it."""
    for name, target in ctx.names.aliases.items():
        if target == "os":
            return name, None
    if "os" in ctx.idx.bound:
        return None, None
    first = next(
        (
            s
            for s in ctx.tree.body
            if isinstance(s, ast.Import | ast.ImportFrom)
            and not (isinstance(s, ast.ImportFrom) and s.module == "__future__")
        ),
        None,
    )
    edit = ctx.text.insert_before(first, ["import os"]) if first is not None else None
    return ("os", edit) if edit is not None else (None, None)
