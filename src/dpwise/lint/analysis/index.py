"""One walk over a file's syntax tree that records what every rule asks about.

Rules never walk the whole tree again: they query these tables (calls per scope in source order,
assignments per scope, functions, loops, parents), so a file costs one parse and one walk.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from dataclasses import dataclass, field

MODULE = "<module>"
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
LOOPS = (ast.For, ast.AsyncFor, ast.While)
Loop = ast.For | ast.AsyncFor | ast.While


def pos(node: ast.AST) -> tuple[int, int]:
    return (node.lineno, node.col_offset)  # type: ignore[attr-defined]  # every node indexed has a position; ast.AST's stub declares none


def assign_targets(stmt: ast.AST) -> list[ast.expr]:
    """What an assignment binds: every target of `a = b = v`, the one of `a: T = v`."""
    if isinstance(stmt, ast.Assign):
        return list(stmt.targets)
    target = getattr(stmt, "target", None)
    return [target] if target is not None else []


def is_main_guard(test: ast.AST) -> bool:
    """`__name__ == "__main__"` (the test of a script's main block)."""
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


@dataclass(frozen=True)
class FunctionInfo:
    key: str  # dotted path: "train", "Trainer.fit", "main.step"
    node: ast.FunctionDef | ast.AsyncFunctionDef
    class_key: str | None  # the class a method belongs to
    parent: str  # the enclosing function scope, or MODULE

    @property
    def params(self) -> list[str]:
        args = self.node.args
        names = [a.arg for a in (*args.posonlyargs, *args.args)]
        if self.class_key is not None and names and names[0] in ("self", "cls"):
            names = names[1:]
        return names + [a.arg for a in args.kwonlyargs]


@dataclass
class Index:
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    functions: dict[str, FunctionInfo] = field(default_factory=dict)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    calls: dict[str, list[ast.Call]] = field(default_factory=lambda: defaultdict(list))
    assigns: dict[str, list[ast.Assign | ast.AnnAssign]] = field(
        default_factory=lambda: defaultdict(list)
    )
    scope_of: dict[ast.AST, str] = field(default_factory=dict)
    imports: list[ast.Import | ast.ImportFrom] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    ifs: dict[str, list[ast.If]] = field(default_factory=lambda: defaultdict(list))
    environ: list[ast.AST] = field(default_factory=list)  # os.environ[...] and `"X" in os.environ`
    attrs: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)

    def all_calls(self) -> list[ast.Call]:
        return [c for calls in self.calls.values() for c in calls]


def _is_environ(expr: ast.AST) -> bool:
    return (isinstance(expr, ast.Attribute) and expr.attr == "environ") or (
        isinstance(expr, ast.Name) and expr.id == "environ"
    )


def _enter_function(
    idx: Index,
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    scope: str,
    prefix: str,
    cls: str | None,
) -> str:
    key = prefix + node.name
    idx.functions[key] = FunctionInfo(key, node, cls, scope)
    idx.bound.add(node.name)
    args = node.args
    for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
        if a is not None:
            idx.bound.add(a.arg)
    return key


_SKIP = (ast.expr_context, ast.operator, ast.boolop, ast.unaryop, ast.cmpop)
_LEAVES = (ast.Name, ast.Constant)


def _children(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes`, minus the context and operator singletons (about a third of all
    nodes, none of which any rule asks about)."""
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, list):
            out += [v for v in value if isinstance(v, ast.AST) and not isinstance(v, _SKIP)]
        elif isinstance(value, ast.AST) and not isinstance(value, _SKIP):
            out.append(value)
    return out


def _record(idx: Index, child: ast.AST, scope: str) -> None:
    # One type() lookup per node (the walk's hot path) instead of an isinstance per table;
    # mypy does not narrow `child` through `kind`, hence the ignores below.
    kind = type(child)
    if kind is ast.Call:
        idx.calls[scope].append(child)  # type: ignore[arg-type]  # `kind` is its type
        idx.scope_of[child] = scope
    elif kind is ast.Attribute:
        idx.attrs.add(child.attr)  # type: ignore[attr-defined]  # `kind` is its type
    elif kind in (ast.Assign, ast.AnnAssign):
        idx.assigns[scope].append(child)  # type: ignore[arg-type]  # `kind` is its type
        idx.scope_of[child] = scope
    elif kind is ast.If:
        idx.ifs[scope].append(child)  # type: ignore[arg-type]  # `kind` is its type
        idx.scope_of[child] = scope
    elif kind in LOOPS:
        idx.loops.append(child)  # type: ignore[arg-type]  # `kind` is its type
        idx.scope_of[child] = scope
    elif kind in (ast.Import, ast.ImportFrom):
        idx.imports.append(child)  # type: ignore[arg-type]  # `kind` is its type
    elif (kind is ast.Subscript and _is_environ(child.value)) or (  # type: ignore[attr-defined]  # `kind` is its type
        kind is ast.Compare and any(_is_environ(c) for c in child.comparators)  # type: ignore[attr-defined]  # `kind` is its type
    ):
        idx.environ.append(child)


def build_index(tree: ast.Module) -> Index:
    idx = Index()
    parents, bound = idx.parents, idx.bound
    stack: list[tuple[ast.AST, str, str, str | None]] = [(tree, MODULE, "", None)]
    while stack:
        node, scope, prefix, cls = stack.pop()
        for child in _children(node):
            if isinstance(child, _LEAVES):  # no children; names bound by assignment
                if isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
                    bound.add(child.id)
                continue
            parents[child] = node
            _record(idx, child, scope)
            if isinstance(child, FUNCTIONS):
                key = _enter_function(idx, child, scope, prefix, cls)
                stack.append((child, key, key + ".", None))
            elif isinstance(child, ast.ClassDef):
                key = prefix + child.name
                idx.classes[key] = child
                bound.add(child.name)
                stack.append((child, scope, key + ".", key))
            else:
                stack.append((child, scope, prefix, cls))
    for calls in idx.calls.values():
        calls.sort(key=pos)
    for assigns in idx.assigns.values():
        assigns.sort(key=pos)
    return idx
