"""The edit for gradient accumulation: micro-steps that end in no optimizer step run under DDP's
`no_sync()`, so gradients are all-reduced once per optimizer step, not once per micro-step.

It applies to a loop whose body calls `.backward()` on every pass and `optimizer.step()` (or
`scaler.step(optimizer)`) only under an `if` after it:

    for i, (x, y) in enumerate(loader):          for i, (x, y) in enumerate(loader):
        loss = crit(model(x), y) / k                 _sync = (i + 1) % k == 0
        loss.backward()                   ->         with _no_sync_unless(model, _sync):
        if (i + 1) % k == 0:                             loss = crit(model(x), y) / k
            optimizer.step()                             loss.backward()
                                                     if (i + 1) % k == 0:
                                                         optimizer.step()

The condition is computed before the micro-step, so it must not read a name the micro-step
assigns; such a loop is left as it is (and `dpwise lint` still reports it).
"""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from dpwise.lint.fix.cst import code
from dpwise.migrate.edits import Edit, lines, statements
from dpwise.migrate.epochs import referenced
from dpwise.migrate.facts import Facts, last

SYNC = "_sync"
HELPER = "_no_sync_unless"


def accumulation_edits(facts: Facts, models: list[str]) -> list[Edit[cst.For]]:
    if not models:
        return []
    edits = []
    for loop in facts.loops:
        found = _accumulation(loop)
        if found is not None:
            edits.append(_edit(loop, *found, models[0]))
    return edits


def _accumulation(loop: cst.For) -> tuple[int, cst.If] | None:
    """(index of the backward statement, the `if` that steps) in the loop's own body."""
    body = lines(loop.body)
    backward = next((i for i, s in enumerate(body) if _is_backward(s)), None)
    if backward is None:
        return None
    step = next((s for s in body[backward + 1 :] if isinstance(s, cst.If) and _steps(s)), None)
    if step is None or _steps_unconditionally(body):
        return None
    assigned = _assigned(body[: backward + 1])
    read = _read(step.test)
    if assigned & read:
        return None
    return backward, step


def _edit(loop: cst.For, backward: int, step: cst.If, model: str) -> Edit[cst.For]:
    test = code(step.test)

    def rewrite(node: cst.For) -> cst.For:
        body = lines(node.body)
        micro, rest = body[: backward + 1], body[backward + 1 :]
        first = micro[0]
        micro[0] = first.with_changes(leading_lines=())
        sync = statements(f"{SYNC} = {test}\n")[0].with_changes(leading_lines=first.leading_lines)
        wrapped = cst.With(
            items=[cst.WithItem(cst.parse_expression(f"{HELPER}({model}, {SYNC})"))],
            body=cst.IndentedBlock(body=micro),
        )
        return node.with_changes(body=node.body.with_changes(body=[sync, wrapped, *rest]))

    return Edit(
        f"the micro-steps before `{test}` run under `{model}.no_sync()`: one all-reduce per "
        "optimizer step, not one per backward",
        "accumulation-without-no-sync",
        loop,
        rewrite,
        needs=(HELPER,),
    )


def _is_backward(stmt: cst.CSTNode) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
        return False
    expr = stmt.body[0]
    return (
        isinstance(expr, cst.Expr)
        and isinstance(expr.value, cst.Call)
        and isinstance(expr.value.func, cst.Attribute)
        and expr.value.func.attr.value == "backward"
    )


def _is_step(call: cst.Call) -> bool:
    if not isinstance(call.func, cst.Attribute) or call.func.attr.value != "step":
        return False
    owner = last(call.func.value).lower()
    return ("opt" in owner or "scaler" in owner) and "sched" not in owner


def _calls(node: cst.CSTNode) -> list[cst.Call]:
    found: list[cst.Call] = []

    class _Calls(cst.CSTVisitor):
        def visit_Call(self, n: cst.Call) -> None:
            found.append(n)

    node.visit(_Calls())
    return found


def _steps(stmt: cst.If) -> bool:
    return any(_is_step(c) for c in _calls(stmt.body))


def _steps_unconditionally(body: Sequence[cst.BaseStatement]) -> bool:
    """An optimizer step at the loop body's own level: no accumulation."""
    return any(
        isinstance(s, cst.SimpleStatementLine) and any(_is_step(c) for c in _calls(s)) for s in body
    )


def _assigned(stmts: Sequence[cst.BaseStatement]) -> set[str]:
    found: set[str] = set()

    class _Targets(cst.CSTVisitor):
        def visit_AssignTarget(self, n: cst.AssignTarget) -> None:
            found.update(referenced(n.target))

        def visit_AugAssign(self, n: cst.AugAssign) -> None:
            found.update(referenced(n.target))

        def visit_AnnAssign(self, n: cst.AnnAssign) -> None:
            found.update(referenced(n.target))

    for stmt in stmts:
        stmt.visit(_Targets())
    return found


def _read(test: cst.BaseExpression) -> set[str]:
    return referenced(test)
