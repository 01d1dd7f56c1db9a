"""DPW009 unguarded-rank-side-effect: files written (or results printed) by every rank."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import Flow, holds_on_entry
from dpwise.lint.analysis.guards import Guards, mentions_rank
from dpwise.lint.analysis.index import MODULE, pos
from dpwise.lint.analysis.loaders import keyword, tokens
from dpwise.lint.analysis.offers import replaces_print
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks DDP scripts (files that build a `DistributedDataParallel`, or scripts that call
`init_process_group` or a set-up helper of the project that does) for side effects that should
happen once, run outside a rank-0 guard: `torch.save`, `np.save*`, `json.dump` /
`pickle.dump` / `yaml.dump`, `open(..., "w"/"a"/"x")`, `Path.write_text`, `.to_csv`,
`.savefig`, `.save_pretrained`, `shutil.copy*`, a `SummaryWriter`, and `print` of metrics (a
`print` that formats a value and mentions a loss, an accuracy, a score...).

Guards recognised: `if rank == 0:`, `if dist.get_rank() == 0:`, `if local_rank in (-1, 0):`,
`if self.gpu_id == 0:` (a worker's GPU index, or any name assigned from a rank),
`if not rank:`, flags named like `is_main`, `is_master`, `master_process`, `is_main_process()`,
a flag the file sets only from such tests (`args.save_logs = args.logs and is_master(args)`),
`cond and rank == 0`, the `else:` of `if rank != 0:`, an early `if rank != 0: return`,
decorators like `@rank_zero_only`, and the rank-0 side of `x if rank == 0 else None`.
A function is guarded when every same-file call of it is. Code that only one process can run is
guarded too: after `assert not args.distributed`, and in the branch of an option the script
refuses in a distributed run (`if opt.evolve:` after `assert not opt.evolve` under
`if LOCAL_RANK != -1:`).

Not reported: writes whose path or text contains the rank (`f"ckpt_rank{rank}.pt"`, or a
variable built from it earlier by `+`, an f-string, `os.path.join` or `Path`;
`print(f"rank {rank}: epoch {epoch} done")` are deliberately per rank; the guide's
`print(f"Rank {rank} Epoch {epoch} completed")` is such a progress line), progress prints that
mention no metric, constant status lines (`print("start training")`), echoes of the options
(`print("loss_scale = {}".format(args.loss_scale))`: a `loss_scale` is a setting, not a loss;
and any print whose every value is an option, `print("Loss scaling:", hparams.loss_scale)`;
values read from `args`, `opt`, `cfg`, `config` or `hparams` are options), prints with `force=True`,
messages on an error path (the block ends in `raise` or `sys.exit(...)`), and side effects inside
functions this file never calls (whoever calls them decides). A `print` after a set-up call that
replaces `builtins.print` (a helper in this file or a sibling module, such as
`init_distributed_mode(args)` installing a print that is silent on the other ranks), or after the
function itself (or every caller of it) assigns `builtins.print = ...`, is not reported.
`torch.distributed.checkpoint.save` is collective and must run on every rank; it is not
`torch.save` and is not reported.

## Why is this bad?
Every rank writes the same file at the same time: truncated or interleaved checkpoints, races on
rename, world-size times the I/O, and logs that repeat every line once per process.

## Example
```python
torch.save(model.module.state_dict(), "checkpoint.pt")
print(f"epoch {epoch}: loss {loss.item():.4f}")
```

## Use instead
```python
if dist.get_rank() == 0:
    torch.save(model.module.state_dict(), "checkpoint.pt")
    print(f"epoch {epoch}: loss {loss.item():.4f}")
```
"""

RULE = Rule(
    code="DPW009",
    name="unguarded-rank-side-effect",
    severity="warning",
    summary="in a DDP script, a file is written (or a result printed) by every rank",
    message="runs on every rank: each process writes the same output",
    help="guard it with `if rank == 0:` (or `if dist.get_rank() == 0:`); put the rank in the file "
    "name if each rank should write its own",
    docs=DOCS,
)

_PRINT = "`print` of metrics"
_METRICS = frozenset(
    {"loss", "losses", "acc", "accuracy", "metric", "metrics", "score", "f1", "ppl"}
    | {"perplexity", "top1", "top5", "auc", "bleu", "rouge", "mse", "mae", "rmse", "miou"}
)


def _writes(mode: ast.AST | None) -> bool:
    text = N.str_value(mode) if mode is not None else None
    return text is not None and any(ch in text for ch in "wax")


def _open_mode(call: ast.Call, index: int) -> ast.AST | None:
    mode = keyword(call, "mode")
    return mode if mode is not None else (call.args[index] if len(call.args) > index else None)


def _inside_written_open(ctx: FileContext, call: ast.Call) -> bool:
    for parent in ctx.ancestors(call):
        if isinstance(parent, ast.With | ast.AsyncWith):
            for item in parent.items:
                expr = item.context_expr
                if isinstance(expr, ast.Call) and _describe(ctx, expr) is not None:
                    return True
    return False


_CONFIG_ROOTS = frozenset({"args", "opt", "opts", "cfg", "config", "hparams", "hp", "flags"})
_WORDS = re.compile(r"[^A-Za-z0-9_]+")


def _text_words(text: str) -> set[str]:
    """Words of a message; a compound such as `loss_scale` is named by its last part (a scale,
    not a loss), `val_loss` by `loss`."""
    found = set()
    for word in _WORDS.split(text.lower()):
        parts = [p for p in word.split("_") if p]
        if parts:
            found |= {parts[-1], parts[-1].rstrip("0123456789")}
    return found


def _config_value(node: ast.AST) -> bool:
    """`args.loss_scale`, `cfg.train.loss`: an option echoed back, not a result."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name) and node.id.lower() in _CONFIG_ROOTS


def _shown_values(expr: ast.AST) -> list[ast.AST]:
    """The non-constant values a print argument shows: an f-string's fields, `.format(...)`'s
    and `%`'s operands, or the expression itself."""
    if isinstance(expr, ast.Constant):
        return []
    if isinstance(expr, ast.JoinedStr):
        return [v.value for v in expr.values if isinstance(v, ast.FormattedValue)]
    if (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Attribute)
        and expr.func.attr == "format"
        and isinstance(expr.func.value, ast.Constant)
    ):
        return [*expr.args, *(k.value for k in expr.keywords)]
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Mod):
        right = expr.right
        return list(right.elts) if isinstance(right, ast.Tuple) else [right]
    return [expr]


def _reports_metrics(call: ast.Call) -> bool:
    """A print of a value named like a metric; a constant status line reports nothing, and
    neither does an echo of the options (`print("loss_scale = {}".format(args.loss_scale))`)."""
    values = [*call.args, *(k.value for k in call.keywords if k.arg is not None)]
    if all(isinstance(v, ast.Constant) for v in values):
        return False
    shown = [v for value in values for v in _shown_values(value)]
    if shown and all(_config_value(v) for v in shown):
        return False  # `print("Loss scaling:", hparams.loss_scale)`: the options, echoed
    words: set[str] = set()
    for node in ast.walk(call):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            words |= _text_words(node.value)
        elif isinstance(node, ast.Attribute) and not _config_value(node):
            words |= tokens(node.attr)
        elif isinstance(node, ast.Name):
            words |= tokens(node.id)
    return bool(words & _METRICS)


def _describe(ctx: FileContext, call: ast.Call) -> str | None:
    """What the side effect is, or None when the call has none worth guarding."""
    q, name, func = ctx.qual(call.func), N.last_name(call.func), call.func
    if q in N.SAVE:
        return f"`{q}`"
    if q in N.DUMP:
        few = q.startswith("yaml") and len(call.args) < 2 and keyword(call, "stream") is None
        return None if few or _inside_written_open(ctx, call) else f"`{q}`"
    if q in N.SUMMARY_WRITER:
        return "`SummaryWriter(...)`"
    builtin = isinstance(func, ast.Name) and q is None and name not in ctx.idx.bound
    if builtin and name == "open" and _writes(_open_mode(call, 1)):
        return '`open(..., "w")`'
    if isinstance(func, ast.Attribute) and name == "open" and _writes(_open_mode(call, 0)):
        return '`.open("w")`'
    if (
        isinstance(func, ast.Attribute)
        and name in N.WRITING_METHODS
        and (call.args or call.keywords)
    ):
        return f"`.{name}(...)`"
    if builtin and name == "print" and _reports_metrics(call) and not _deliberate(ctx, call):
        return _PRINT
    return None


def _ends_in_error(block: list[ast.stmt]) -> bool:
    last = block[-1] if block else None
    if isinstance(last, ast.Raise):
        return True
    return (
        isinstance(last, ast.Expr)
        and isinstance(last.value, ast.Call)
        and N.last_name(last.value.func) in ("exit", "_exit")
    )


def _deliberate(ctx: FileContext, call: ast.Call) -> bool:
    """`print(..., force=True)` (every rank on purpose), or a message on an error path: the
    block ends in `raise` or `sys.exit(...)`."""
    force = keyword(call, "force")
    if isinstance(force, ast.Constant) and force.value is True:
        return True
    stmt = ctx.statement_of(call)
    parent = ctx.idx.parents.get(stmt) if stmt is not None else None
    for field in ("body", "orelse", "finalbody", "handlers", "cases"):
        block = getattr(parent, field, None)
        if isinstance(block, list) and stmt in block:
            return _ends_in_error(block)
    return False


_NOT_TEXT = (ast.Compare, ast.BoolOp, ast.UnaryOp)
_PATH_CALLS = ("join", "Path", "format", "str", "joinpath", "with_name", "with_suffix")


def _path_parts(expr: ast.AST) -> Iterator[ast.AST]:
    """The pieces a path or message is built from: names, f-string fields, `+` operands,
    `os.path.join` / `Path` / `.format` arguments (not the receivers of other calls)."""
    if isinstance(expr, ast.JoinedStr):
        for part in expr.values:
            if isinstance(part, ast.FormattedValue):
                yield from _path_parts(part.value)
    elif isinstance(expr, ast.BinOp):
        yield from _path_parts(expr.left)
        yield from _path_parts(expr.right)
    elif isinstance(expr, ast.Call) and N.last_name(expr.func) in _PATH_CALLS:
        for arg in (*expr.args, *(k.value for k in expr.keywords)):
            yield from _path_parts(arg)
        if isinstance(expr.func, ast.Attribute):
            yield from _path_parts(expr.func.value)
    else:
        yield expr


def _per_rank(expr: ast.AST, names: set[str]) -> bool:
    return any(
        (isinstance(p, ast.Name) and p.id in names) or mentions_rank(p) for p in _path_parts(expr)
    )


def per_rank_names(ctx: FileContext) -> dict[str, set[str]]:
    """Per scope, names assigned a path or text built from the rank, directly or through another
    such name: `out = os.path.join(root, f"rank{rank}")`, then `path = out + "/model.pt"`."""
    found: dict[str, set[str]] = {}
    for scope, body in ctx.idx.assigns.items():
        names = found.setdefault(scope, set())
        visible = names | found.get(MODULE, set())
        for stmt in body:  # source order: a name is built before it is used
            if not isinstance(stmt, ast.Assign) or isinstance(stmt.value, _NOT_TEXT):
                continue
            if _per_rank(stmt.value, visible):
                names |= {t.id for t in stmt.targets if isinstance(t, ast.Name)}
                visible |= names
    return found


def _names_rank(ctx: FileContext, call: ast.Call, per_rank: dict[str, set[str]]) -> bool:
    if mentions_rank(call):
        return True
    names = per_rank.get(ctx.scope(call), set()) | per_rank.get(MODULE, set())
    return any(_per_rank(v, names) for v in (*call.args, *(k.value for k in call.keywords)))


def _silences_print(ctx: FileContext, call: ast.Call) -> bool:
    """A set-up call that replaces `builtins.print` (`init_distributed_mode(args)` from a sibling
    module that installs a print that is silent on the other ranks)."""
    key = ctx.callee(call)
    if key is not None:
        return replaces_print(ctx.function_node(key))
    q = ctx.qual(call.func) or ctx.star_qual(call.func)
    if ctx.project is None or q is None or "." not in q.lstrip("."):
        return False
    module, _, func = q.rpartition(".")
    return ctx.project.silences_print(ctx.path, module, func)


def _is_print_slot(target: ast.AST) -> bool:
    """`builtins.print`, `__builtin__.print` or `__builtins__["print"]` as an assignment target."""
    if isinstance(target, ast.Attribute) and target.attr == "print":
        return isinstance(target.value, ast.Name) and target.value.id in ("builtins", "__builtin__")
    return (
        isinstance(target, ast.Subscript)
        and N.str_value(target.slice) == "print"
        and N.last_name(target.value) == "__builtins__"
    )


def _print_replaced_at(ctx: FileContext) -> dict[str, tuple[int, int]]:
    """Per scope, where the function itself assigns `builtins.print = ...` (first place)."""
    found: dict[str, tuple[int, int]] = {}
    for scope, body in ctx.idx.assigns.items():
        for stmt in body:
            if isinstance(stmt, ast.Assign) and any(map(_is_print_slot, stmt.targets)):
                found.setdefault(scope, pos(stmt))
    return found


class _Quiet:
    """Has `print` been replaced (by a set-up call, or by an assignment in the function or in
    one of its callers) before this point?"""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.flow = Flow(ctx, _silences_print)
        self.assigned = _print_replaced_at(ctx)

    def _before(self, scope: str, node: ast.AST) -> bool:
        at = self.assigned.get(scope)
        return (at is not None and at < pos(node)) or self.flow.before(scope, node)

    def established(self, scope: str, node: ast.AST) -> bool:
        if self._before(scope, node):
            return True
        return bool(holds_on_entry(self.ctx, scope, self._before))


def check(ctx: FileContext) -> Iterator[Hit]:
    if not (ctx.is_ddp_script or ctx.starts_group_by_helper):
        return
    guards = Guards(ctx)
    per_rank = per_rank_names(ctx)
    quiet = _Quiet(ctx)
    for call in ctx.idx.all_calls():
        what = _describe(ctx, call)
        if what is None or _names_rank(ctx, call, per_rank):
            continue
        if what == _PRINT and quiet.established(ctx.scope(call), call):
            continue
        if guards.status(call) is False:
            yield Hit(
                call, message=f"{what} runs on every rank: each process writes the same output"
            )
