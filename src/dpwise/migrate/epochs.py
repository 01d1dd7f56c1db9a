"""The edits that give every pass over the data a new order, the same on every process:
`set_epoch` at the top of each epoch loop, for each training loader that loop serves.

A loader is served by an epoch loop when the loop iterates it (`for x, y in loader`, also through
`enumerate(...)` or `tqdm(...)`), hands it on (`train(model, loader, epoch)`), or, in a class,
when the loop runs in a method of the class whose `__init__` built `self.loader`. A `while` loop
around a pass over a loader (step-based training: `while step < max_steps: for batch in loader:`)
has no epoch variable: `_next_epoch(loader)` counts the passes instead.
"""

from __future__ import annotations

from typing import Any

import libcst as cst

from dpwise.migrate.edits import Edit, statements
from dpwise.migrate.facts import Facts, dotted

NEXT_EPOCH = "_next_epoch"


def set_epoch_edits(module: cst.Module, facts: Facts) -> list[Edit[Any]]:
    loaders = {name for _, name in facts.loaders}
    homes = _classes(module)
    functions = {
        s.name.value: s for s in module.body if isinstance(s, cst.FunctionDef)
    }  # `train(epoch)` reading the module's `trainloader`
    built_in = {name: homes.get(id(stmt)) for stmt, name in facts.loaders}
    edits: list[Edit[Any]] = []
    served: set[str] = set()  # loaders an edit gives their epoch to
    for loop in facts.loops:
        if not isinstance(loop.target, cst.Name) or "epoch" not in loop.target.value.lower():
            continue
        mine = [
            name
            for name in sorted(loaders)
            if name in referenced(loop.body, functions)
            or (name.startswith("self.") and built_in[name] is homes.get(id(loop)))
        ]
        if mine:
            edits.append(_set_epoch(loop, loop.target.value, mine))
            served.update(mine)
    for while_loop in facts.while_loops:
        passes = [n for n in _iterated(while_loop.body) if n in loaders]
        if passes and not _inside_epoch_loop(while_loop, facts):
            edits.append(_count_passes(while_loop, passes[0]))
            served.add(passes[0])
    owners = _functions(module)
    for stmt, name in facts.loaders:
        owner = owners.get(id(stmt))
        if name not in served and owner is not None and name in _iterated(owner.body):
            edits.append(_count_built(stmt, name))  # built anew on every call: `run_epoch()`
    return edits


def _count_built(stmt: cst.SimpleStatementLine, loader: str) -> Edit[cst.SimpleStatementLine]:
    return Edit(
        f"`{NEXT_EPOCH}({loader})` after `{loader}` is built: a loader built on every call "
        "counts the passes over its data set, so each pass has a new order",
        "missing-set-epoch",
        stmt,
        after=statements(f"{NEXT_EPOCH}({loader})\n"),
        needs=(NEXT_EPOCH,),
    )


def _functions(module: cst.Module) -> dict[int, cst.FunctionDef]:
    """For every statement written in a function, the innermost function."""
    owners: dict[int, cst.FunctionDef] = {}
    stack: list[cst.FunctionDef] = []

    class _Owners(cst.CSTVisitor):
        def visit_FunctionDef(self, n: cst.FunctionDef) -> None:
            stack.append(n)

        def leave_FunctionDef(self, n: cst.FunctionDef) -> None:
            stack.pop()

        def visit_SimpleStatementLine(self, n: cst.SimpleStatementLine) -> None:
            if stack:
                owners[id(n)] = stack[-1]

    module.visit(_Owners())
    return owners


def _set_epoch(loop: cst.For, epoch: str, served: list[str]) -> Edit[cst.For]:
    text = "".join(
        f"if isinstance({name}.sampler, DistributedSampler):\n"
        f"    {name}.sampler.set_epoch({epoch})\n"
        for name in served
    )
    lines = statements(text)

    def rewrite(node: cst.For) -> cst.For:
        return node.with_changes(body=node.body.with_changes(body=[*lines, *node.body.body]))

    said = ", ".join(f"`{name}.sampler.set_epoch({epoch})`" for name in served)
    return Edit(f"{said} at the top of the epoch loop", "missing-set-epoch", loop, rewrite)


def _count_passes(loop: cst.While, loader: str) -> Edit[cst.While]:
    lines = statements(f"{NEXT_EPOCH}({loader})\n")

    def rewrite(node: cst.While) -> cst.While:
        return node.with_changes(body=node.body.with_changes(body=[*lines, *node.body.body]))

    return Edit(
        f"`{NEXT_EPOCH}({loader})` before each pass over `{loader}`: its DistributedSampler's "
        "epoch is the number of passes so far (the loop has no epoch variable)",
        "missing-set-epoch",
        loop,
        rewrite,
        needs=(NEXT_EPOCH,),
    )


def referenced(node: cst.CSTNode, functions: dict[str, cst.FunctionDef] | None = None) -> set[str]:
    """Every dotted name read in `node` (`loader`, `self.loader`, `args.x`), and in the bodies
    of the module's `functions` it calls (one level: `train(epoch)` reading `trainloader`)."""
    found: set[str] = set()
    called: list[cst.FunctionDef] = []

    class _Refs(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            if functions and isinstance(n.func, cst.Name) and n.func.value in functions:
                called.append(functions[n.func.value])

        def visit_Name(self, n: cst.Name) -> None:
            found.add(n.value)

        def visit_Attribute(self, n: cst.Attribute) -> None:
            name = dotted(n)
            if name:
                found.add(name)

    node.visit(_Refs())
    for function in called:
        found |= referenced(function.body)
    return found


def _iterated(body: cst.CSTNode) -> list[str]:
    """Names in the iterables of the `for` loops inside `body`, outermost first."""
    found: list[str] = []

    class _Fors(cst.CSTVisitor):
        def visit_For(self, n: cst.For) -> None:
            found.extend(sorted(referenced(n.iter)))

    body.visit(_Fors())
    return found


def _inside_epoch_loop(loop: cst.While, facts: Facts) -> bool:
    return any(
        isinstance(outer.target, cst.Name)
        and "epoch" in outer.target.value.lower()
        and _contains(outer.body, loop)
        for outer in facts.loops
    )


def _contains(tree: cst.CSTNode, node: cst.CSTNode) -> bool:
    seen: list[bool] = []

    class _Find(cst.CSTVisitor):
        def on_visit(self, n: cst.CSTNode) -> bool:
            if n is node:
                seen.append(True)
            return not seen

    tree.visit(_Find())
    return bool(seen)


def _classes(module: cst.Module) -> dict[int, cst.ClassDef | None]:
    """For every statement and loop, the class it is written in (None at module level)."""
    homes: dict[int, cst.ClassDef | None] = {}
    stack: list[cst.ClassDef] = []

    class _Homes(cst.CSTVisitor):
        def visit_ClassDef(self, n: cst.ClassDef) -> None:
            stack.append(n)

        def leave_ClassDef(self, n: cst.ClassDef) -> None:
            stack.pop()

        def on_visit(self, n: cst.CSTNode) -> bool:
            if isinstance(n, cst.SimpleStatementLine | cst.For | cst.While):
                homes[id(n)] = stack[-1] if stack else None
            return super().on_visit(n)

    module.visit(_Homes())
    return homes
