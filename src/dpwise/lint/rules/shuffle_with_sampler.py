"""DPW006 shuffle-with-sampler: `DataLoader(shuffle=True, sampler=...)` raises at run time."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from typing import TYPE_CHECKING

from dpwise.lint.analysis import names as N

if TYPE_CHECKING:
    import libcst
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.loaders import given, keyword
from dpwise.lint.fix import cst
from dpwise.lint.model import SAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks for a `DataLoader` given both `shuffle=True` (the literal) and a `sampler` or
`batch_sampler` that is not `None`, by keyword or by position.

## Why is this bad?
`DataLoader` raises `ValueError: sampler option is mutually exclusive with shuffle` when the job
starts (after the data set, and often the model, have been loaded on every rank). With a
`DistributedSampler` the shuffling is the sampler's job: `DistributedSampler(dataset,
shuffle=True)` is its default.

## Example
```python
loader = DataLoader(dataset, batch_size=64, shuffle=True, sampler=DistributedSampler(dataset))
```

## Use instead
```python
loader = DataLoader(dataset, batch_size=64, sampler=DistributedSampler(dataset, shuffle=True))
```

## Fix (safe)
Removes `shuffle=True` (a positional `True` becomes `False`): the combination raises, so no
working program changes behaviour.

## References
- https://pytorch.org/docs/stable/data.html#torch.utils.data.DataLoader
"""

RULE = Rule(
    code="DPW006",
    name="shuffle-with-sampler",
    severity="error",
    summary="a `DataLoader` gets both `shuffle=True` and a `sampler`",
    message="`shuffle=True` together with a `sampler`: `DataLoader` raises `ValueError`",
    help="remove `shuffle=True`; let the sampler shuffle (`DistributedSampler(dataset, "
    "shuffle=True)`)",
    docs=DOCS,
)


def _true(expr: ast.AST | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is True


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.calls_to(N.DATALOADER):
        shuffle = next((k for k in call.keywords if k.arg == "shuffle"), None)
        node: ast.AST | None = shuffle
        if shuffle is None and len(call.args) > 2:
            node = call.args[2]
        value = shuffle.value if shuffle is not None else node
        samplers = (keyword(call, "sampler"), keyword(call, "batch_sampler"), *call.args[3:5])
        if node is not None and _true(value) and any(map(given, samplers)):
            yield Hit(node, data=call)


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    if not isinstance(hit.node, ast.keyword):  # `DataLoader(data, 64, True, sampler)`
        return Fix(SAFE, "Pass `shuffle=False`", (ctx.text.replace(hit.node, "False"),))

    def drop(call: libcst.Call) -> libcst.Call | None:
        index = cst.keyword_index(call, "shuffle")
        return cst.without_arg(call, index) if index is not None else None

    edit = cst.call_edit(ctx.text, hit.data, drop)
    return Fix(SAFE, "Remove `shuffle=True`", (edit,)) if edit else None
