"""The edits about the model: its placements on this process's device, the DDP wrap in place of
DataParallel's (also for a single-process script, and out of a device test), and the unwrapped
model where the script reaches through the wrapper (state dicts, `model.module`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import libcst as cst

from dpwise.lint.fix.cst import code
from dpwise.migrate.edits import Block, Edit, Replacement, indented, lines, statements
from dpwise.migrate.facts import Facts, dotted

_DEVICE_WORDS = ("device_ids", "cuda", "gpu")


def _method(call: cst.Call) -> cst.Attribute:
    """The `owner.name` a call the facts list as a method call (a placement, a state dict) calls."""
    assert isinstance(call.func, cst.Attribute), "the facts keep method calls only"
    return call.func


def own_calls(block: Block) -> set[int]:
    """The calls written in `block` itself, not in a function or class defined inside it: the
    ones that see the names `_dist_setup()` binds there."""
    found: set[int] = set()

    class _Calls(cst.CSTVisitor):
        def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
            return False

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            return False

        def visit_Call(self, node: cst.Call) -> None:
            found.add(id(node))

    for stmt in block.body:
        stmt.visit(_Calls())
    return found


def placement_edits(facts: Facts, local: set[int]) -> list[Edit[cst.Call]]:
    wraps = {id(call) for _, call, _ in facts.data_parallel}
    edits: list[Edit[cst.Call]] = []
    for call in facts.placements:
        method = _method(call)
        if id(method.value) in wraps:  # `nn.DataParallel(model).cuda()`: placed inside
            edits.append(
                Edit(
                    f"`.{method.attr.value}()` after the wrap -> the model is "
                    "placed on this process's device before it is wrapped",
                    "missing-set-device",
                    call,
                    lambda node: _method(node).value,
                )
            )
            continue
        where = code(call.args[0].value) if call.args else ""
        is_cuda = method.attr.value == "cuda"
        if not is_cuda and not any(word in where for word in _DEVICE_WORDS):
            continue

        device = "device" if id(call) in local else "_device()"

        def rewrite(node: cst.Call, device: str = device) -> cst.Call:
            func = node.func.with_changes(attr=cst.Name("to"))
            return node.with_changes(func=func, args=_on_device(node.args, device))

        edits.append(
            Edit(
                f"`.{method.attr.value}({where})` -> `.to({device})`: this process's own device",
                "missing-set-device",
                call,
                rewrite,
            )
        )
    return edits


def _on_device(args: Sequence[cst.Arg], device: str) -> list[cst.Arg]:
    """The arguments of `.cuda(...)` / `.to(...)` with the device replaced and the rest kept
    (`non_blocking=True`, a dtype): `.cuda(0, non_blocking=True)` -> `.to(device, ...)`."""
    value = cst.parse_expression(device)
    rest = [a for a in args if a.keyword is not None and a.keyword.value != "device"]
    positional = [a for a in args if a.keyword is None]
    first = cst.Arg(value)
    extra = positional[1:]  # `.to("cuda", torch.float16)`: the dtype stays
    out = [first, *extra, *rest]
    return [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in out]


def wrap_edits(facts: Facts) -> list[Edit[cst.Call]]:
    placed = {id(_method(call).value) for call in facts.placements}
    placed_names = {name for _, name in facts.placed_models}  # `model = Net().to(device)`
    edits: list[Edit[cst.Call]] = []
    for _, call, _ in facts.data_parallel:
        arg = call.args[0].value
        model = code(arg)
        if id(call) in placed:
            model = f"{model}.to(device)"
        # DDP needs the module on this process's device when it wraps it (DataParallel did not:
        # `model = nn.DataParallel(Net()); model.to("cuda")` is fine there, an error for DDP)
        ready = id(call) in placed or _placed(arg) or model in placed_names
        on_device = model if ready else f"{model}.to(device)"
        new = indented(_ddp(model, on_device))
        edits.append(
            Edit(
                "`nn.DataParallel(...)` -> `DistributedDataParallel(...)` under "
                "torchrun (the plain model in one process)",
                "data-parallel-usage",
                call,
                _replaced_by(new),
            )
        )
    return edits


def _replaced_by(new: cst.BaseExpression) -> Callable[[cst.CSTNode], cst.CSTNode]:
    """A rewrite that puts `new` in the target's place."""
    return lambda node: new


def wrap_condition_edits(module: cst.Module, facts: Facts) -> list[Edit[cst.If]]:
    """`if torch.cuda.device_count() > 1: model = nn.DataParallel(model)`: under torchrun each
    process has one device, so a device test must not decide the wrap (the DDP wrap decides by
    itself: `dist.is_initialized()`). An `if` that holds only the wrap becomes the wrap; else
    the wrap moves after the `if`, and the rest of its body stays under the test."""
    wraps = [stmt for stmt, _, _ in facts.data_parallel]
    found: list[cst.If] = []

    class _Ifs(cst.CSTVisitor):
        def visit_If(self, node: cst.If) -> None:
            if isinstance(node.body, cst.IndentedBlock) and any(s in wraps for s in node.body.body):
                found.append(node)

    module.visit(_Ifs())
    edits: list[Edit[cst.If]] = []
    for node in found:
        test = code(node.test)
        if node.orelse is not None or not any(w in test.lower() for w in (*_DEVICE_WORDS, "n_gpu")):
            continue
        body = lines(node.body)
        at = [i for i, stmt in enumerate(body) if stmt in wraps]
        alone = len(at) == len(body)
        edits.append(
            Edit(
                f"the wrap under `if {test}:` "
                + ("runs unconditionally" if alone else "moves after that `if`")
                + ": under torchrun each process has one device, and the DDP wrap applies "
                "whenever processes train together (`dist.is_initialized()`)",
                "data-parallel-usage",
                node,
                _unconditional(at, alone),
            )
        )
    return edits


def _unconditional(at: list[int], alone: bool) -> Callable[[cst.If], Replacement]:
    """The rewrite that takes the wraps (statements `at` of the `if`) out of it."""

    def rewrite(node: cst.If) -> Replacement:
        body = lines(node.body)
        moved = [body[i] for i in at]
        moved[0] = moved[0].with_changes(leading_lines=node.leading_lines)
        if alone:
            return cst.FlattenSentinel(moved)
        kept = [s for i, s in enumerate(body) if i not in at]
        rest = node.with_changes(body=node.body.with_changes(body=kept))
        return cst.FlattenSentinel([rest, *moved])

    return rewrite


def _placed(expr: cst.BaseExpression) -> bool:
    return (
        isinstance(expr, cst.Call)
        and isinstance(expr.func, cst.Attribute)
        and expr.func.attr.value in ("to", "cuda")
    )


def _ddp(model: str, on_device: str | None = None) -> str:
    """The wrap under torchrun, the plain model alone, over several lines (in brackets)."""
    return (
        "(\n"
        "    DistributedDataParallel(\n"
        f"        {on_device or model},\n"
        '        device_ids=[local_rank] if device.type == "cuda" else None,\n'
        "    )\n"
        "    if dist.is_initialized()\n"
        f"    else {model}\n"
        ")"
    )


def state_dict_edits(facts: Facts, wrapped: set[str]) -> list[Edit[cst.Call]]:
    edits: list[Edit[cst.Call]] = []
    for call in facts.state_dicts:
        owner = _method(call).value
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
        verb = "loaded into" if _method(call).attr.value == "load_state_dict" else "saved from"
        edits.append(
            Edit(
                f"`{name}`'s weights {verb} the unwrapped model (no `module.` prefix)",
                "wrapped-state-dict",
                call,
                _owner_replaced_by(new),
            )
        )
    return edits


def _owner_replaced_by(new: cst.BaseExpression) -> Callable[[cst.Call], cst.Call]:
    """A rewrite of `owner.method(...)` into `new.method(...)`."""
    return lambda node: node.with_changes(func=_method(node).with_changes(value=new))


def module_use_edits(
    module: cst.Module, facts: Facts, wrapped: set[str]
) -> list[Edit[cst.Attribute]]:
    """`model.module.save_pretrained(...)`, `model.module.config`: the wrapper exists only under
    torchrun, so `model.module` becomes `getattr(model, "module", model)`. Left alone: the
    `.module` of a state_dict call (`_state_dicts` has it) and one under `hasattr(model,
    "module")`, which already works both ways."""
    owners = {id(_method(call).value) for call in facts.state_dicts}
    found: list[tuple[cst.Attribute, str]] = []
    guarded: list[bool] = [False]

    class _Uses(cst.CSTVisitor):
        def visit_IfExp(self, node: cst.IfExp) -> None:
            guarded.append(guarded[-1] or "hasattr(" in code(node.test))

        def leave_IfExp(self, node: cst.IfExp) -> None:
            guarded.pop()

        def visit_If(self, node: cst.If) -> None:
            guarded.append(guarded[-1] or "hasattr(" in code(node.test))

        def leave_If(self, node: cst.If) -> None:
            guarded.pop()

        def visit_Attribute(self, node: cst.Attribute) -> None:
            name = dotted(node.value)
            mine = node.attr.value == "module" and name in wrapped and id(node) not in owners
            if mine and not guarded[-1]:
                found.append((node, name))

    module.visit(_Uses())
    return [
        Edit(
            f'`{name}.module` -> `getattr({name}, "module", {name})`: the wrapper exists only '
            "under torchrun (the plain model in one process)",
            "data-parallel-usage",
            node,
            _replaced_by(cst.parse_expression(f'getattr({name}, "module", {name})')),
        )
        for node, name in found
    ]


def single_wrap_edits(facts: Facts) -> list[Edit[cst.SimpleStatementLine]]:
    """A single-process script: its model wrapped in DDP after it is placed, under torchrun."""
    if facts.data_parallel:
        return []
    stmt, name = facts.placed_models[0]
    line = f"{name} = {_ddp(name)}\n"
    return [
        Edit(
            f"`{name}` wrapped in `DistributedDataParallel` under torchrun (gradients averaged "
            "across processes); the plain model in one process",
            "ddp-before-init-process-group",
            stmt,
            after=statements(line),
        )
    ]
