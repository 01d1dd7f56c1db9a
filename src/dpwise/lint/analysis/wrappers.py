"""Which expressions hold a DistributedDataParallel / DataParallel wrapper.

Names are followed through assignments in source order within a function (`model = DDP(model)`
then `model.state_dict()`; a later `model = model.module` unwraps), through `self.model = DDP(...)`
across a class's methods, and into same-file functions through their parameters
(`save(ddp_model)` makes `model` a wrapper inside `def save(model)`). `x.module` and calls other
than `.to()` / `.cuda()` are not wrappers, and neither is a name whose `if`/`else` assigns
`x.module` in one branch and `x` in the other. A conditional expression is a wrapper when one side
is (`self.ema if use_ema else self.model`), unless a side unwraps (`m.module if ddp else m`).
"""

from __future__ import annotations

import ast
from collections import defaultdict

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import MODULE, assign_targets, pos

Entry = tuple[tuple[int, int], str, ast.AST]  # (position, scope, value)
_PASS_THROUGH = ("to", "cuda", "cpu", "train", "float", "half", "bfloat16", "requires_grad_")
_END = (1 << 30, 0)
_MAX_DEPTH = 6


def _pairs(target: ast.AST, value: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    if (
        isinstance(target, ast.Tuple | ast.List)
        and isinstance(value, ast.Tuple | ast.List)
        and len(target.elts) == len(value.elts)
    ):
        return [p for t, v in zip(target.elts, value.elts, strict=True) for p in _pairs(t, v)]
    return [(target, value)]


class Wrappers:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.names: dict[str, dict[str, list[Entry]]] = defaultdict(lambda: defaultdict(list))
        self.attrs: dict[tuple[str | None, str], list[Entry]] = defaultdict(list)
        for scope, stmts in ctx.idx.assigns.items():
            for stmt in stmts:
                self._add(scope, stmt)

    def _add(self, scope: str, stmt: ast.Assign | ast.AnnAssign) -> None:
        value = stmt.value
        if value is None:
            return
        targets = assign_targets(stmt)
        for target in targets:
            for t, v in _pairs(target, value):
                entry = (pos(stmt), scope, v)
                if isinstance(t, ast.Name):
                    self.names[scope][t.id].append(entry)
                elif (
                    isinstance(t, ast.Attribute)
                    and isinstance(t.value, ast.Name)
                    and t.value.id in ("self", "cls")
                ):
                    self.attrs[(self.ctx.class_of(scope), t.attr)].append(entry)

    def kind(self, expr: ast.AST, scope: str, at: tuple[int, int], depth: int = 0) -> str | None:
        """'DistributedDataParallel', 'DataParallel' or None for `expr` evaluated at `at`."""
        if depth > _MAX_DEPTH:
            return None
        if isinstance(expr, ast.Call):
            q = self.ctx.qual(expr.func)
            if q in N.DDP:
                return "DistributedDataParallel"
            if q in N.DATA_PARALLEL:
                return "DataParallel"
            func = expr.func
            if isinstance(func, ast.Attribute) and func.attr in _PASS_THROUGH:
                return self.kind(func.value, scope, at, depth + 1)
            key = self.ctx.callee(expr)
            if key is not None:
                return self.returns(key, depth + 1)
            return "DistributedDataParallel" if expr in self.ctx.ddp_calls else None
        if isinstance(expr, ast.Name):
            return self._name(expr.id, scope, at, depth)
        if isinstance(expr, ast.IfExp):
            return self._either(expr, scope, at, depth)
        if (
            isinstance(expr, ast.Attribute)
            and isinstance(expr.value, ast.Name)
            and expr.value.id in ("self", "cls")
            and expr.attr != "module"
        ):
            attr = (self.ctx.class_of(scope), expr.attr)
            return self._first(self.attrs.get(attr, []), depth)
        return None

    def _either(self, expr: ast.IfExp, scope: str, at: tuple[int, int], depth: int) -> str | None:
        """`ema.module if use_ema else self.model`: a wrapper on one side is a wrapper, unless
        the author unwraps on the other side (`model.module if distributed else model`)."""
        sides = (expr.body, expr.orelse)
        for side, other in (sides, sides[::-1]):
            if (
                isinstance(side, ast.Attribute)
                and side.attr == "module"
                and ast.dump(side.value) == ast.dump(other)
            ):
                return None
        for side in sides:
            kind = self.kind(side, scope, at, depth + 1)
            if kind:
                return kind
        return None

    def returns(self, key: str, depth: int = 0) -> str | None:
        """What same-file function `key` returns: `def smart_ddp(m): return DDP(m)`."""
        for node in ast.walk(self.ctx.function_node(key)):
            if isinstance(node, ast.Return) and node.value is not None:
                kind = self.kind(node.value, key, pos(node), depth + 1)
                if kind:
                    return kind
        return None

    def _first(self, entries: list[Entry], depth: int) -> str | None:
        for at, scope, value in entries:
            kind = self.kind(value, scope, at, depth + 1)
            if kind:
                return kind
        return None

    def _name(self, name: str, scope: str, at: tuple[int, int], depth: int) -> str | None:
        earlier = [e for e in self.names[scope].get(name, ()) if e[0] < at]
        if earlier:
            last_at, _, value = earlier[-1]
            if self._unwrapped_in_other_branch(scope, last_at, name):
                return None
            return self.kind(value, scope, last_at, depth + 1)
        info = self.ctx.idx.functions.get(scope)
        if info is not None and name in info.params:
            return self._param(scope, info.params.index(name), name, depth)
        if info is not None and info.parent != MODULE and name in self.names.get(info.parent, {}):
            # a closure (`def save_checkpoint(epoch):` inside `main`) sees its enclosing
            # function's variable: its last value there
            return self._name(name, info.parent, _END, depth + 1)
        if scope != MODULE and name in self.names[MODULE]:
            return self._name(name, MODULE, _END, depth + 1)
        return None

    def _unwrapped_in_other_branch(self, scope: str, at: tuple[int, int], name: str) -> bool:
        """`if distributed: g = model.module` / `else: g = model`: the author unwraps where
        the model is wrapped (like `model.module if distributed else model`)."""
        stmt = next((s for s in self.ctx.idx.assigns[scope] if pos(s) == at), None)
        branch = self.ctx.idx.parents.get(stmt) if stmt is not None else None
        if not isinstance(branch, ast.If):
            return False
        other = branch.orelse if stmt in branch.body else branch.body
        return any(
            isinstance(s, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in s.targets)
            and isinstance(s.value, ast.Attribute)
            and s.value.attr == "module"
            for s in other
        )

    def _param(self, scope: str, index: int, name: str, depth: int) -> str | None:
        for caller, call in self.ctx.callers.get(scope, ()):
            arg = next((k.value for k in call.keywords if k.arg == name), None)
            if arg is None and index < len(call.args):
                arg = call.args[index]
                if isinstance(arg, ast.Starred):
                    continue
            if arg is not None:
                kind = self.kind(arg, caller, pos(call), depth + 1)
                if kind:
                    return kind
        return None
