"""The planner: a script's facts in, the list of edits that make it a DDP script out (or the
reasons it cannot be migrated safely)."""

from __future__ import annotations

import libcst as cst

from dpwise.lint.cst import code, with_keyword
from dpwise.migrate import helper
from dpwise.migrate.edits import Edit, statements
from dpwise.migrate.facts import Facts, dotted, last, read
from dpwise.migrate.refusal import MigrationRefused

SETUP = "rank, world_size, local_rank, device = _dist_setup()\n"
_DEVICE_WORDS = ("device_ids", "cuda", "gpu")


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
    return [
        *_setup(module, block),
        *_placements(facts),
        *_wraps(facts),
        *_loaders(facts),
        *_set_epochs(facts),
        *_guards(facts),
        *_state_dicts(facts, wrapped),
        _teardown(block),
    ]


def _scope_block(module: cst.Module, facts: Facts):  # type: ignore[no-untyped-def]
    """The block (module or indented body) holding the DataParallel wrap, or the first placement."""
    anchors = [stmt for stmt, _, _ in facts.data_parallel]
    if not anchors and facts.placements:
        anchors = [s for s, _ in facts.loaders]
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


def _loaders(facts: Facts) -> list[Edit]:
    """A `DataLoader(...)` in the script is edited in place; a loader another module builds
    (`get_dataloader(...)`) is re-built at run time by `_distributed_loader`."""
    edits = [_sampled(call) for call in facts.dataloader_calls]
    here = {id(call) for call in facts.dataloader_calls}
    for stmt, name in facts.loaders:
        value = stmt.body[0].value
        if id(value) in here or last(value.func) in facts.defined:
            continue
        edits.append(
            Edit(
                f"`{name}` re-built with a DistributedSampler (shuffle moved into it) "
                "and a per-process batch of global batch // world_size",
                "missing-distributed-sampler",
                value,
                _resharded,
            )
        )
    return edits


def _resharded(node: cst.Call) -> cst.Call:
    return cst.Call(func=cst.Name("_distributed_loader"), args=[cst.Arg(node)])


def _sampled(call: cst.Call) -> Edit:
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a for a in call.args if a.keyword}
    dataset = keywords.get("dataset") or (positional[0] if positional else None)
    batch = keywords.get("batch_size") or (positional[1] if len(positional) > 1 else None)
    shuffle = keywords.get("shuffle")
    shuffled = code(shuffle.value) if shuffle is not None else "False"
    data = code(dataset.value) if dataset is not None else "dataset"
    size = code(batch.value) if batch is not None else "1"

    def rewrite(node: cst.Call) -> cst.Call:
        args = list(node.args)
        if len(args) > 1 and args[1].keyword is None:  # `DataLoader(data, 64)`
            args[1] = args[1].with_changes(
                value=cst.parse_expression(f"_per_process_batch({size})")
            )
        node = node.with_changes(args=args)
        if not (len(args) > 1 and args[1].keyword is None):
            node = with_keyword(node, "batch_size", f"_per_process_batch({size})")
        node = with_keyword(node, "shuffle", "False")
        sampler = (
            f"DistributedSampler({data}, num_replicas=_world_size(), rank=_rank(), "
            f"shuffle={shuffled})"
        )
        return with_keyword(node, "sampler", sampler)

    return Edit(
        f"`DataLoader({data}, ...)`: a DistributedSampler (shuffle={shuffled} moved "
        f"into it), `shuffle=False`, per-process batch `{size} // world_size`",
        "missing-distributed-sampler",
        call,
        rewrite,
    )


def _set_epochs(facts: Facts) -> list[Edit]:
    names = {name for _, name in facts.loaders}
    edits = []
    for loop in facts.loops:
        if not isinstance(loop.target, cst.Name) or "epoch" not in loop.target.value:
            continue
        inner = [n for n in _names_in_inner_loops(loop) if n in names]
        if not inner:
            continue
        epoch, loader = loop.target.value, inner[0]
        line = statements(
            f"if isinstance({loader}.sampler, DistributedSampler):\n"
            f"    {loader}.sampler.set_epoch({epoch})\n"
        )

        def rewrite(node: cst.For, line=line) -> cst.For:
            return node.with_changes(body=node.body.with_changes(body=[*line, *node.body.body]))

        edits.append(
            Edit(
                f"`{loader}.sampler.set_epoch({epoch})` at the top of the epoch loop",
                "missing-set-epoch",
                loop,
                rewrite,
            )
        )
    return edits


def _names_in_inner_loops(loop: cst.For) -> list[str]:
    found: list[str] = []

    class _Inner(cst.CSTVisitor):
        def visit_For(self, node: cst.For) -> None:
            if node is not loop:
                node.iter.visit(_Names(found))

    loop.body.visit(_Inner())
    return found


class _Names(cst.CSTVisitor):
    def __init__(self, out: list[str]) -> None:
        self.out = out

    def visit_Name(self, node: cst.Name) -> None:
        self.out.append(node.value)


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


def _teardown(block) -> Edit:  # type: ignore[no-untyped-def]
    return Edit(
        "`destroy_process_group()` when the script's work is done",
        "missing-destroy-process-group",
        block.body[-1],
        after=statements("if dist.is_initialized():\n    dist.destroy_process_group()\n"),
    )
