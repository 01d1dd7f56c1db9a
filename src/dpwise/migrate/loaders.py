"""The edits that give each process its share of the data: a DistributedSampler on the
loaders (`set_epoch` is `epochs`' part)."""

from __future__ import annotations

from typing import Any

import libcst as cst

from dpwise.lint.fix.cst import code, with_keyword
from dpwise.migrate.edits import Edit, reflowed, statements
from dpwise.migrate.facts import Facts, dotted, last, plain_sampler


def loader_edits(facts: Facts) -> list[Edit[Any]]:
    """A `DataLoader(data, ...)` assigned to a name gets a `DistributedSampler` built on the line
    before it; one whose data set is an expression (`DataLoader(TensorDataset(x, y), ...)`, which
    must not be built twice) or a loader another module builds (`get_dataloader(...)`) is
    re-built at run time by `_distributed_loader`."""
    edits: list[Edit[Any]] = []
    for call, stmt, target in facts.dataloader_calls:
        data = _dataset(call)
        if data is not None and not dotted(data):
            edits.append(_rebuilt(call, target or "DataLoader(...)"))
        else:
            edits += _sampled(call, stmt, target, facts.names)
    here = {id(call) for call, _, _ in facts.dataloader_calls}
    for stmt, name in facts.loaders:
        first = stmt.body[0]  # `name = loader(...)`: facts found an assignment of a call
        value = first.value if isinstance(first, cst.Assign) else None
        if (
            not isinstance(value, cst.Call)
            or id(value) in here
            or last(value.func) in facts.defined
        ):
            continue
        edits.append(_rebuilt(value, name))
    return edits


def _rebuilt(call: cst.Call, name: str) -> Edit[cst.Call]:
    return Edit(
        f"`{name}` re-built with a DistributedSampler (shuffle moved into it) "
        "and a per-process batch of global batch // world_size",
        "missing-distributed-sampler",
        call,
        _resharded,
    )


def _dataset(call: cst.Call) -> cst.BaseExpression | None:
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a for a in call.args if a.keyword}
    dataset = keywords.get("dataset") or (positional[0] if positional else None)
    return dataset.value if dataset is not None else None


def _sampler_name(target: str, taken: set[str]) -> str:
    base = target.rsplit(".", 1)[-1].lower()
    name = base.replace("dataloader", "sampler").replace("loader", "sampler")
    name = name if "sampler" in name else "sampler"
    while name in taken:
        name += "_ddp"
    return name


def _resharded(node: cst.Call) -> cst.Call:
    return reflowed(cst.Call(func=cst.Name("_distributed_loader"), args=[cst.Arg(node)]))


def _sampled(
    call: cst.Call, stmt: cst.SimpleStatementLine | None, target: str, taken: set[str]
) -> list[Edit[Any]]:
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: a for a in call.args if a.keyword}
    batch = keywords.get("batch_size") or (positional[1] if len(positional) > 1 else None)
    shuffle = keywords.get("shuffle")
    shuffled = plain_sampler(call) or (code(shuffle.value) if shuffle is not None else "False")
    dataset = _dataset(call)
    data = code(dataset) if dataset is not None else "dataset"
    size = code(batch.value) if batch is not None else "1"
    built = (
        f"DistributedSampler({data}, num_replicas=_world_size(), rank=_rank(), shuffle={shuffled})"
    )
    sampler = _sampler_name(target, taken) if stmt is not None else built

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
        return reflowed(with_keyword(node, "sampler", sampler))

    said = f"`DataLoader({data}, ...)`: a DistributedSampler (shuffle={shuffled} moved into it)"
    edits: list[Edit[Any]] = [
        Edit(
            f"{said}, `shuffle=False`, per-process batch `{size} // world_size`",
            "missing-distributed-sampler",
            call,
            rewrite,
        )
    ]
    if stmt is not None:
        edits.append(
            Edit(
                f"`{sampler} = DistributedSampler({data}, ...)`: each process draws its own "
                "share of every epoch",
                "missing-distributed-sampler",
                stmt,
                before=[_reflowed_assign(f"{sampler} = {built}\n")],
            )
        )
    return edits


def _reflowed_assign(line: str) -> cst.SimpleStatementLine:
    """`name = call(...)` with a long call laid out one argument per line."""
    stmt = statements(line)[0]
    assert isinstance(stmt, cst.SimpleStatementLine), line
    assign = stmt.body[0]
    assert isinstance(assign, cst.Assign) and isinstance(assign.value, cst.Call), line
    return stmt.with_changes(body=[assign.with_changes(value=reflowed(assign.value, 64))])
