"""The planner: a script's facts in, the list of edits that make it a DDP script out (or the
reasons it cannot be migrated safely)."""

from __future__ import annotations

from typing import Any, TypeGuard

import libcst as cst

from dpwise.lint.fix.cst import code
from dpwise.migrate import helper
from dpwise.migrate.accumulate import accumulation_edits
from dpwise.migrate.edits import Block, Edit, statements
from dpwise.migrate.epochs import set_epoch_edits
from dpwise.migrate.facts import Facts, dotted, read
from dpwise.migrate.loaders import loader_edits
from dpwise.migrate.refusal import MigrationRefused
from dpwise.migrate.wrap import (
    module_use_edits,
    own_calls,
    placement_edits,
    single_wrap_edits,
    state_dict_edits,
    wrap_condition_edits,
    wrap_edits,
)

SETUP = "rank, world_size, local_rank, device = _dist_setup()\n"
TEARDOWN = "if dist.is_initialized():\n    _dist_teardown()\n"
_BOUND = ("rank", "world_size", "local_rank", "device")  # what SETUP binds


def plan(module: cst.Module) -> list[Edit[Any]]:
    facts = read(module)
    refusals = list(facts.refusals)
    taken = sorted(set(helper.NAMES) & facts.defined)
    if taken:
        refusals.append(f"the script already defines {', '.join(taken)}: rename it first")
    block = _scope_block(module, facts)
    if block is None and not refusals:
        refusals.append(
            "found no `nn.DataParallel(...)` wrap and no model placed on a device "
            "(`.to(...)` / `.cuda()`): nothing to migrate"
        )
    if refusals or block is None:  # no block: refused above
        raise MigrationRefused(refusals)
    wrapped = {name for _, _, name in facts.data_parallel if name}
    if not facts.data_parallel:
        wrapped = {name for _, name in facts.placed_models[:1]}
    body: list[Edit[Any]] = [
        *placement_edits(facts, own_calls(block)),
        *wrap_edits(facts),
        *wrap_condition_edits(module, facts),
        *single_wrap_edits(facts),
        *loader_edits(facts),
        *set_epoch_edits(module, facts),
        *accumulation_edits(facts, sorted(wrapped)),
        *_guards(facts),
        *state_dict_edits(facts, wrapped),
        *module_use_edits(module, facts, wrapped),
    ]
    needs = {name for edit in body for name in edit.needs}
    return [*_setup(module, block, needs), *body, _teardown(module)]


def _scope_block(module: cst.Module, facts: Facts) -> Block | None:
    """The body the process group is set up in: the function (or the `__main__` block, or the
    module) that holds the DataParallel wrap, or the first placed model; None without either."""
    anchors = [stmt for stmt, _, _ in facts.data_parallel]
    if not anchors:
        anchors = [stmt for stmt, _ in facts.placed_models[:1]]
    found: list[Block] = []
    scopes: list[Block] = [module]

    class _Scopes(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
            scopes.append(node.body)

        def leave_FunctionDef(self, node: cst.FunctionDef) -> None:
            scopes.pop()

        def visit_If(self, node: cst.If) -> None:
            if len(scopes) == 1 and node in module.body and _is_main_guard(node):
                scopes.append(node.body)  # code run only as a script, not on import

        def leave_If(self, node: cst.If) -> None:
            if scopes[-1] is node.body:
                scopes.pop()

        def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
            if not found and node in anchors:
                found.append(scopes[-1])

    module.visit(_Scopes())
    return found[0] if found else None


def _setup(module: cst.Module, block: Block, needs: set[str]) -> list[Edit[Any]]:
    code = helper.block(needs)
    code = code if "import torch" in module.code else "import torch\n" + code
    edits: list[Edit[Any]] = [
        Edit(
            "inserts `_dist_setup()`: the process group under torchrun (nccl on CUDA, gloo on "
            "CPU) and `torch.cuda.set_device(LOCAL_RANK)`; one process otherwise",
            "missing-set-device",
            module,
            after=statements(code),
        )
    ]
    own = [s for s in block.body if _assigns(s, _BOUND)]
    if own:  # `device = torch.device("cuda")`: this process's device must win
        edits.append(
            Edit(
                "calls `_dist_setup()` after the script's own `device = ...` (each process "
                "takes its own device), before the model is wrapped",
                "ddp-before-init-process-group",
                own[-1],
                after=statements(SETUP),
            )
        )
        return edits
    first = _first_statement(module, block)
    edits.append(
        Edit(
            "calls `_dist_setup()` before the model is built and wrapped",
            "ddp-before-init-process-group",
            first,
            before=statements(SETUP),
        )
    )
    return edits


def _first_statement(module: cst.Module, block: Block) -> cst.CSTNode:
    """The first statement of `block` that is no import and no docstring (in the module: after
    its last import line, where the inserted block goes)."""
    body = list(block.body)
    if block is module:
        imports = [
            i
            for i, s in enumerate(body)
            if isinstance(s, cst.SimpleStatementLine) and _is_import(s)
        ]
        body = body[imports[-1] + 1 :] if imports else body
    for stmt in body:
        if not (isinstance(stmt, cst.SimpleStatementLine) and (_is_import(stmt) or _doc(stmt))):
            return stmt
    return body[-1]


def _doc(stmt: cst.SimpleStatementLine) -> bool:
    first = stmt.body[0]
    return isinstance(first, cst.Expr) and isinstance(first.value, cst.SimpleString)


def _assigns(stmt: cst.CSTNode, names: tuple[str, ...]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Assign):
        return False
    return any(
        isinstance(t.target, cst.Name) and t.target.value in names for t in stmt.body[0].targets
    )


def _is_import(stmt: cst.SimpleStatementLine) -> bool:
    return all(isinstance(x, cst.Import | cst.ImportFrom) for x in stmt.body)


def _guards(facts: Facts) -> list[Edit[cst.SimpleStatementLine]]:
    def rewrite(stmt: cst.SimpleStatementLine) -> cst.If:
        return cst.If(
            test=cst.parse_expression("is_main_process()"),
            body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=())]),
            leading_lines=stmt.leading_lines,
        )

    return [
        Edit(
            f"`{code(stmt.body[0]).strip()}` runs on rank 0 only",
            "unguarded-rank-side-effect",
            stmt,
            rewrite,
        )
        for stmt in facts.side_effects
    ]


def _teardown(module: cst.Module) -> Edit[Any]:
    """The group is left when the program is done: at the end of the `if __name__ ==
    "__main__":` block (in a `finally:` when that block ends by exiting: `sys.exit(main())`),
    or after the script's last statement."""
    what = "`destroy_process_group()` when the script's work is done (DDP's reducers first)"
    rule = "missing-destroy-process-group"
    main = next((s for s in module.body if _is_main_guard(s)), None)
    if main is None or not isinstance(main.body, cst.IndentedBlock):  # (not: _is_main_guard's)
        return Edit(what, rule, module.body[-1], after=statements(TEARDOWN))
    if not _exits(main.body.body[-1]):
        return Edit(what, rule, main.body.body[-1], after=statements(TEARDOWN))
    finally_ = cst.Finally(body=cst.IndentedBlock(body=statements(TEARDOWN)))

    def rewrite(node: cst.If) -> cst.If:
        inner = cst.Try(body=node.body, finalbody=finally_)
        return node.with_changes(body=cst.IndentedBlock(body=[inner]))

    return Edit(what + ", in a `finally:` (the block ends by exiting)", rule, main, rewrite)


def _exits(stmt: cst.BaseStatement) -> bool:
    """`sys.exit(...)`, `exit(...)`, `raise SystemExit(...)`: nothing after it runs."""
    if not isinstance(stmt, cst.SimpleStatementLine):
        return False
    first = stmt.body[0]
    if isinstance(first, cst.Raise):
        return True
    call = first.value if isinstance(first, cst.Expr) else None
    return isinstance(call, cst.Call) and dotted(call.func) in ("sys.exit", "exit", "quit")


def _is_main_guard(stmt: cst.CSTNode) -> TypeGuard[cst.If]:
    """`if __name__ == "__main__":` over lines (a one-line `if ...: main()` has no statement
    to set up or tear down beside: the script's last statement is that `if`)."""
    if not isinstance(stmt, cst.If) or stmt.orelse is not None:
        return False
    if not isinstance(stmt.body, cst.IndentedBlock):
        return False
    text = code(stmt.test).replace("'", '"')
    return text.replace(" ", "") in ('__name__=="__main__"', '"__main__"==__name__')
