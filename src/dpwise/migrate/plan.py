"""The planner: a script's facts in, the list of edits that make it a DDP script out (or the
reasons it cannot be migrated safely)."""

from __future__ import annotations

import libcst as cst

from dpwise.lint.cst import code
from dpwise.migrate import helper
from dpwise.migrate.edits import Edit, statements
from dpwise.migrate.facts import Facts, dotted, read
from dpwise.migrate.loaders import loader_edits, set_epoch_edits
from dpwise.migrate.refusal import MigrationRefused

SETUP = "rank, world_size, local_rank, device = _dist_setup()\n"
TEARDOWN = "if dist.is_initialized():\n    _dist_teardown()\n"
_DEVICE_WORDS = ("device_ids", "cuda", "gpu")
_BOUND = ("rank", "world_size", "local_rank", "device")  # what SETUP binds


def plan(module: cst.Module) -> list[Edit]:
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
    if refusals:
        raise MigrationRefused(refusals)
    wrapped = {name for _, _, name in facts.data_parallel if name}
    if not facts.data_parallel:
        wrapped = {name for _, name in facts.placed_models[:1]}
    return [
        *_setup(module, block),
        *_placements(facts),
        *_wraps(facts),
        *_wrap_single(facts),
        *loader_edits(facts),
        *set_epoch_edits(facts),
        *_guards(facts),
        *_state_dicts(facts, wrapped),
        _teardown(block),
    ]


def _scope_block(module: cst.Module, facts: Facts):  # type: ignore[no-untyped-def]
    """The block (module or indented body) holding the DataParallel wrap, or the first placement."""
    anchors = [stmt for stmt, _, _ in facts.data_parallel]
    if not anchors:
        anchors = [stmt for stmt, _ in facts.placed_models[:1]]
    found = []

    class _Blocks(cst.CSTVisitor):
        def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
            if not found and any(s in anchors for s in node.body):
                found.append(node)

    if any(s in anchors for s in module.body):
        return module
    module.visit(_Blocks())
    return found[0] if found else None


def _setup(module: cst.Module, block) -> list[Edit]:  # type: ignore[no-untyped-def]
    code = helper.BLOCK if "import torch" in module.code else "import torch\n" + helper.BLOCK
    edits = [
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
    first = next(
        s for s in block.body if not (isinstance(s, cst.SimpleStatementLine) and _is_import(s))
    )
    edits.append(
        Edit(
            "calls `_dist_setup()` before the model is built and wrapped",
            "ddp-before-init-process-group",
            first,
            before=statements(SETUP),
        )
    )
    return edits


def _assigns(stmt: cst.BaseStatement, names: tuple[str, ...]) -> bool:
    if not isinstance(stmt, cst.SimpleStatementLine) or not isinstance(stmt.body[0], cst.Assign):
        return False
    return any(
        isinstance(t.target, cst.Name) and t.target.value in names for t in stmt.body[0].targets
    )


def _is_import(stmt: cst.SimpleStatementLine) -> bool:
    return all(isinstance(x, cst.Import | cst.ImportFrom) for x in stmt.body)


def _placements(facts: Facts) -> list[Edit]:
    wraps = {id(call) for _, call, _ in facts.data_parallel}
    edits = []
    for call in facts.placements:
        if id(call.func.value) in wraps:  # `nn.DataParallel(model).cuda()`: placed inside
            edits.append(
                Edit(
                    f"`.{call.func.attr.value}()` after the wrap -> the model is "
                    "placed on this process's device before it is wrapped",
                    "missing-set-device",
                    call,
                    lambda node: node.func.value,
                )
            )
            continue
        where = code(call.args[0].value) if call.args else ""
        is_cuda = call.func.attr.value == "cuda"
        if not is_cuda and not any(word in where for word in _DEVICE_WORDS):
            continue

        def rewrite(node: cst.Call) -> cst.Call:
            func = node.func.with_changes(attr=cst.Name("to"))
            return node.with_changes(func=func, args=[cst.Arg(cst.Name("device"))])

        edits.append(
            Edit(
                f"`.{call.func.attr.value}({where})` -> `.to(device)`: this process's own device",
                "missing-set-device",
                call,
                rewrite,
            )
        )
    return edits


def _wraps(facts: Facts) -> list[Edit]:
    placed = {id(call.func.value) for call in facts.placements}
    edits = []
    for _, call, _ in facts.data_parallel:
        model = code(call.args[0].value)
        if id(call) in placed:
            model = f"{model}.to(device)"
        new = cst.parse_expression(
            f'DistributedDataParallel({model}, device_ids=[local_rank] if device.type == "cuda" '
            f"else None) if dist.is_initialized() else {model}"
        ).with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
        edits.append(
            Edit(
                "`nn.DataParallel(...)` -> `DistributedDataParallel(...)` under "
                "torchrun (the plain model in one process)",
                "data-parallel-usage",
                call,
                lambda node, new=new: new,
            )
        )
    return edits


def _guards(facts: Facts) -> list[Edit]:
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


def _state_dicts(facts: Facts, wrapped: set[str]) -> list[Edit]:
    edits = []
    for call in facts.state_dicts:
        owner = call.func.value
        if dotted(owner) in wrapped:
            name = dotted(owner)
        elif (
            isinstance(owner, cst.Attribute)
            and owner.attr.value == "module"
            and dotted(owner.value) in wrapped
        ):
            name = dotted(owner.value)
        else:
            continue
        new = cst.parse_expression(f'getattr({name}, "module", {name})')
        edits.append(
            Edit(
                f"`{name}`'s weights saved unwrapped (no `module.` prefix)",
                "wrapped-state-dict",
                call,
                lambda node, new=new: node.with_changes(func=node.func.with_changes(value=new)),
            )
        )
    return edits


def _wrap_single(facts: Facts) -> list[Edit]:
    """A single-process script: its model wrapped in DDP after it is placed, under torchrun."""
    if facts.data_parallel:
        return []
    stmt, name = facts.placed_models[0]
    line = (
        f'{name} = DistributedDataParallel({name}, device_ids=[local_rank] if device.type == "cuda"'
        f" else None) if dist.is_initialized() else {name}\n"
    )
    return [
        Edit(
            f"`{name}` wrapped in `DistributedDataParallel` under torchrun (gradients averaged "
            "across processes); the plain model in one process",
            "ddp-before-init-process-group",
            stmt,
            after=statements(line),
        )
    ]


def _teardown(block) -> Edit:  # type: ignore[no-untyped-def]
    return Edit(
        "`destroy_process_group()` when the script's work is done (DDP's reducers released first)",
        "missing-destroy-process-group",
        block.body[-1],
        after=statements(TEARDOWN),
    )
