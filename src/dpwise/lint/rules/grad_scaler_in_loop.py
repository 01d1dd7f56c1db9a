"""DPW012 grad-scaler-in-loop: a GradScaler created again and again."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks for a `GradScaler(...)` (`torch.amp`, `torch.cuda.amp` or `torch.cpu.amp`) created inside a
training loop's body, or inside a same-file function (say `train_one_epoch`) that is called from
inside a training loop. A training loop calls `backward` / `step` / `scale`, or its variable counts
epochs, steps, batches or iterations; a loop over the runs of a sweep that builds one scaler per run
is not one.

## Why is this bad?
A `GradScaler` carries state across steps: the current loss scale and how many steps have passed
since the last overflow. A new scaler starts again at 65536 and has to back off through skipped
steps each time; the scale never settles, so steps are skipped for nothing (and a scaler's state
saved in a checkpoint means little). One scaler per process, created once before the loop, is the
documented
pattern.

## Example
```python
for x, y in loader:
    scaler = torch.amp.GradScaler("cuda")
    with torch.amp.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
```

## Use instead
```python
scaler = torch.amp.GradScaler("cuda")
for x, y in loader:
    with torch.amp.autocast("cuda"):
        loss = criterion(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
```

## References
- https://pytorch.org/docs/stable/notes/amp_examples.html
"""

RULE = Rule(
    code="DPW012",
    name="grad-scaler-in-loop",
    severity="warning",
    summary="a `GradScaler` is created inside the training loop",
    message="a `GradScaler` is created inside a loop: its loss scale starts over every time",
    help="create one `GradScaler` per process before the loop and reuse it",
    docs=DOCS,
)


_TRAINING_CALLS = ("backward", "step", "scale")
_TRAINING_TARGETS = ("epoch", "step", "batch", "iter")


def training_loop(loop: ast.AST | None) -> bool:
    """A loop that trains: it calls `backward` / `step` / `scale`, or counts epochs or steps
    (a loop over configurations of a sweep is not one)."""
    if loop is None:
        return False
    target = getattr(loop, "target", None)
    if target is not None and any(
        isinstance(n, ast.Name) and any(w in n.id.lower() for w in _TRAINING_TARGETS)
        for n in ast.walk(target)
    ):
        return True
    return any(
        isinstance(n, ast.Call) and N.last_name(n.func) in _TRAINING_CALLS for n in ast.walk(loop)
    )


def check(ctx: FileContext) -> Iterator[Hit]:
    for call in ctx.calls_to(N.GRAD_SCALER):
        if training_loop(ctx.enclosing_loop(call)):
            yield Hit(call)
            continue
        scope = ctx.scope(call)
        in_loop = [
            site
            for _, site in ctx.callers.get(scope, ())
            if training_loop(ctx.enclosing_loop(site))
        ]
        if in_loop:
            name = scope.rsplit(".", 1)[-1]
            yield Hit(
                call,
                message=f"a `GradScaler` is created in `{name}`, which is called inside a loop "
                f"(line {in_loop[0].lineno}): its loss scale starts over every time",
            )
