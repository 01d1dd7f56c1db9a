"""The edits that give each process its share of the data: a DistributedSampler on the
loaders, `set_epoch` at the top of the epoch loop."""

from __future__ import annotations

import libcst as cst

from dpwise.lint.cst import code, with_keyword
from dpwise.migrate.edits import Edit, statements
from dpwise.migrate.facts import Facts, last


def loader_edits(facts: Facts) -> list[Edit]:
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


def set_epoch_edits(facts: Facts) -> list[Edit]:
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
