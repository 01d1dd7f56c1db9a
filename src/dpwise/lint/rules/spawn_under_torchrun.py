"""DPW007 spawn-under-torchrun: a script that spawns its own workers and expects torchrun too."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import pos
from dpwise.lint.model import Hit, Rule

DOCS = """\
## What it does
Checks for `mp.spawn` / `torch.multiprocessing.spawn` (or `start_processes`) in a script (a file
with an `if __name__ == "__main__":` block or module-level set-up; launcher libraries are not
checked) that also
reads torchrun's variables (`LOCAL_RANK`, `RANK`, `WORLD_SIZE`, `LOCAL_WORLD_SIZE`, `GROUP_RANK`,
`TORCHELASTIC_RUN_ID`, through `os.environ[...]`, `os.environ.get`, `os.getenv` or `in
os.environ`) or says, in a string, docstring or comment, to launch it with `torchrun`,
`torch.distributed.run` or `torch.distributed.launch`. `RANK` and `WORLD_SIZE` are also the
generic `env://` rendezvous variables (a multi-node job may start one process per node and spawn
one per GPU, as PyTorch's ImageNet example does), so a read of those under an `if` (`if
args.dist_url == "env://":`) is not taken as evidence; an unconditional read is. Writing those
variables (`os.environ["RANK"] = str(rank)` in a spawned worker) is not reading them. A spawn that
runs only when the script was not launched by torchrun (`if "LOCAL_RANK" not in os.environ:
mp.spawn(...)`, or an earlier `if` on those variables in the same function) is the right way to
support both launchers and is not reported.

Only the script is read: an instruction in a separate README or guide (such as the guide's advice
to run `ddp_train.py` with torchrun) is not visible to the linter.

## Why is this bad?
torchrun already starts one process per GPU. Each of them then spawns world-size more workers: a
double launch with world-size squared processes, colliding ranks and ports, and a hang or an
out-of-memory error.

## Example
```python
# launch: torchrun --nproc_per_node=4 train.py
if __name__ == "__main__":
    mp.spawn(train, args=(4,), nprocs=4)
```

## Use instead
```python
# launch: torchrun --nproc_per_node=4 train.py
if __name__ == "__main__":
    train(int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]))
```

## References
- https://pytorch.org/docs/stable/elastic/run.html
"""

RULE = Rule(
    code="DPW007",
    name="spawn-under-torchrun",
    severity="error",
    summary="`mp.spawn` in a script that is also meant to run under torchrun (double launch)",
    message="`mp.spawn` in a script launched by torchrun: each torchrun worker spawns more",
    help="pick one launcher: under torchrun call the worker directly with `LOCAL_RANK` / "
    "`WORLD_SIZE`, or spawn only when `LOCAL_RANK` is not set",
    docs=DOCS,
)

_LAUNCHER_ONLY = frozenset({"LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "TORCHELASTIC_RUN_ID"})
_MENTION = re.compile(r"torchrun|torch\.distributed\.(?:run|launch)")
_LAUNCH_WORDS = ("torchrun", "elastic", "launched", "launcher")


def env_reads(ctx: FileContext) -> list[tuple[str, ast.AST]]:
    """(variable, node) for every read of a torchrun variable (conditional or not)."""
    reads: list[tuple[str, ast.AST]] = []
    for node in ctx.idx.environ:
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = N.str_value(node.slice)
        elif isinstance(node, ast.Compare):
            key = N.str_value(node.left)
        else:
            continue
        if key in N.TORCHRUN_ENV:
            reads.append((key, node))
    for call in ctx.calls_to({"os.environ.get", "os.getenv"}):
        key = N.str_value(call.args[0]) if call.args else None
        if key in N.TORCHRUN_ENV:
            reads.append((key, call))
    return sorted(reads, key=lambda r: pos(r[1]))


def _about_launcher(test: ast.AST, reads: set[ast.AST]) -> bool:
    for node in ast.walk(test):
        if node in reads:
            return True
        name = N.last_name(node).lower()
        if name and any(word in name for word in _LAUNCH_WORDS):
            return True
    return False


def _conditional(ctx: FileContext, spawn: ast.Call) -> bool:
    """Spawning depends on how the script was launched."""
    reads = {node for _, node in env_reads(ctx)}
    for parent in ctx.ancestors(spawn):
        if isinstance(parent, ast.If | ast.IfExp) and _about_launcher(parent.test, reads):
            return True
    scope = ctx.scope(spawn)
    return any(
        pos(branch) < pos(spawn) and _about_launcher(branch.test, reads)
        for branch in ctx.idx.ifs.get(scope, ())
    )


def _conditional_read(ctx: FileContext, node: ast.AST) -> bool:
    return any(isinstance(p, ast.If | ast.IfExp) for p in ctx.ancestors(node))


def _evidence(ctx: FileContext) -> str | None:
    """Why the script looks meant for torchrun: a read of a variable only a launcher sets, an
    unconditional read of `RANK` / `WORLD_SIZE`, or a mention of torchrun."""
    for key, node in env_reads(ctx):
        if key in _LAUNCHER_ONLY or not _conditional_read(ctx, node):
            return f"reads torchrun's `{key}` (line {node.lineno})"  # type: ignore[attr-defined]  # a read is an expression: it has a position
    match = _MENTION.search(ctx.source)
    if match is None:
        return None
    line = ctx.source.count("\n", 0, match.start()) + 1
    return f"mentions `{match.group(0)}` (line {line})"


def check(ctx: FileContext) -> Iterator[Hit]:
    spawns = ctx.calls_to(N.SPAWN)
    if not spawns or not ctx.is_script:
        return
    evidence = _evidence(ctx)
    if evidence is None:
        return
    for spawn in spawns:
        if not _conditional(ctx, spawn):
            message = (
                f"`mp.spawn` in a script that {evidence}: under torchrun this is a double launch"
            )
            yield Hit(spawn, message=message)
