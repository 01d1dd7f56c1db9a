"""DPW020 find-unused-parameters: `find_unused_parameters=True` walks the graph every step."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.loaders import keyword
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Reports a `DistributedDataParallel(...)` built with the literal `find_unused_parameters=True`
(and not `static_graph=True`). A value the script computes (`find_unused_parameters=args.fup`) is
a choice made elsewhere and is not reported. Severity `info`: the option is correct, and needed
when some parameters get no gradient in some steps; this is a note on its cost.

## Why is this bad?
With the option, DDP traverses the autograd graph from the forward's outputs after every forward
to find the parameters that will get no gradient. When no parameter is ever unused, torch (2.13)
warns at run time that the flag "results in an extra traversal of the autograd graph every
iteration, which can adversely affect performance". On this project's own bench
(`bench/find_unused_cost.py`, a small transformer, one process) it cost 1.02× per step; a larger
graph has more to walk. Better, when they apply:
- remove the unused parameters (or the branch that leaves them unused) and drop the flag;
- `static_graph=True` when the same parameters are unused in every step (no control flow that
  changes them between iterations): DDP learns the graph once;
- keep the flag when the set truly changes from step to step (a block skipped at random).

## Example
```python
model = DDP(model, device_ids=[local_rank], find_unused_parameters=True)
```

## Use instead
```python
model = DDP(model, device_ids=[local_rank])  # every parameter gets a gradient
model = DDP(model, device_ids=[local_rank], static_graph=True)  # same ones unused every step
```

## References
- https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html
"""

RULE = Rule(
    code="DPW020",
    name="find-unused-parameters",
    severity="info",
    summary="`find_unused_parameters=True` walks the autograd graph after every forward",
    message="`find_unused_parameters=True` traverses the autograd graph every step",
    help="if every parameter gets a gradient, drop the flag; if the same ones are unused every "
    "step, use `static_graph=True`; keep it only when the unused set changes between steps",
    docs=DOCS,
)


def _true(value: ast.AST | None) -> bool:
    return isinstance(value, ast.Constant) and value.value is True


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.ddp_calls:
        flag = next((k for k in call.keywords if k.arg == "find_unused_parameters"), None)
        if flag is not None and _true(flag.value) and not _true(keyword(call, "static_graph")):
            yield Hit(flag)
