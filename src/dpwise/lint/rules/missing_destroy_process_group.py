"""DPW011 missing-destroy-process-group."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.index import MODULE, pos
from dpwise.lint.model import UNSAFE, Fix, Hit, Rule

DOCS = """\
## What it does
Checks scripts (files with an `if __name__ == "__main__":` block, distributed set-up at module
level, or another entry point: `fire.Fire`, `@hydra.main`, `@click.command`, a console script of
the project) that call `init_process_group` for a call of `destroy_process_group` anywhere in the
same file (directly or in a same-file `cleanup()`). A call into another module named like a clean-up
(`utils.cleanup()`, `teardown_distributed()`) is trusted to destroy the group. A script whose
process group is created by a set-up helper in a sibling module (`init_distributed_mode(args)`
defined in `utils.py` beside it, which calls `init_process_group`) owns that group and is checked
the same way, also when the helper gets there through functions of further modules of the project
(`init_dist(launcher)` calling `_init_dist_pytorch()` of another module, which calls a third: four
modules deep; an import cycle stops the search there); so does a script that hands its main
function to a launcher that starts workers
which create the group (`launch(main, num_gpus)` from the project's package, offered through its
`__init__.py`, or detectron2's `detectron2.engine.launch`). That finding has no automatic fix: the
call belongs at the end of the function the workers run, not after `launch(...)` returns.
Library modules that create a process group on their caller's behalf are not checked: the caller
owns it.

## Why is this bad?
The process group holds sockets, NCCL communicators and their GPU memory. Exiting without
destroying it makes PyTorch warn (`ProcessGroupNCCL` "was not destroyed"), can hang at exit while
NCCL waits for peers, and leaks the group into anything that runs afterwards in the same process
(a test, a notebook, a second training phase).

## Example
```python
def main():
    dist.init_process_group("nccl")
    train()
```

## Use instead
```python
def main():
    dist.init_process_group("nccl")
    try:
        train()
    finally:
        dist.destroy_process_group()
```

## Fix (unsafe)
Adds `dist.destroy_process_group()` (with the file's name for `torch.distributed`) after the
function that creates the group has returned: at the end of its caller's body when it has exactly
one caller in the file, climbing to the `if __name__ == "__main__":` block. By then that function's
DDP wrapper is freed. Its Reducer holds a reference to the group; when the wrapper outlives
`destroy_process_group()`, freeing it later can deadlock in gloo's destructor (pytorch#56297,
pytorch#154976; dpwise's own `bench/ddp_teardown_stress.py --cycles` hung in 3 of 3 tries in
that order, 0 of 3 with the wrapper freed first). A function with no caller in the file (started
by `mp.spawn`) gets the call at its end. Where the
group may not exist at that point (created in a function, under an `if`, or by a helper), the call
is guarded by `if dist.is_initialized():`. Unsafe: an exception still skips it; a
`try`/`finally` is the complete answer.

## References
- https://pytorch.org/docs/stable/distributed.html#shutdown
"""

RULE = Rule(
    code="DPW011",
    name="missing-destroy-process-group",
    severity="warning",
    summary="`init_process_group` is called but `destroy_process_group` never is",
    message="`init_process_group` is called but `destroy_process_group` never is",
    help="call `dist.destroy_process_group()` when training ends (in a `finally:` block)",
    docs=DOCS,
)

_CLEANUP = ("cleanup", "clean_up", "teardown", "tear_down", "destroy", "shutdown")


def _cleans_up(ctx: FileContext) -> bool:
    if ctx.calls_to(N.DESTROY) or any(True for _ in ctx.calls_named("destroy_process_group")):
        return True
    for call in ctx.idx.all_calls():
        if ctx.callee(call) is None and not (ctx.qual(call.func) or "").startswith("torch."):
            name = N.last_name(call.func).lower()
            if any(word in name for word in _CLEANUP):
                return True
    return False


def _helper_inits(ctx: FileContext) -> list[ast.Call]:
    """Calls of a sibling module's function that creates the process group
    (`init_distributed_mode(args)` defined in `utils.py` beside the script), or of a launcher
    whose workers do (`launch(main, num_gpus)`)."""
    return sorted(ctx.group_helper_calls(), key=pos)


def check(ctx: FileContext) -> Iterator[Hit]:
    if not ctx.is_script:
        return
    if ctx.init_calls:
        if not _cleans_up(ctx):
            yield Hit(ctx.init_calls[0])
        return
    helpers = _helper_inits(ctx)
    if helpers and not _cleans_up(ctx):
        name = N.last_name(helpers[0].func)
        if ctx.launches_group(helpers[0]):
            message = (
                f"`{name}` starts workers that create the process group, but "
                "`destroy_process_group` is never called"
            )
            # no automatic fix: the call belongs at the end of the function the workers run
            yield Hit(helpers[0], message=message, data="launcher")
            return
        message = f"`{name}` creates the process group but `destroy_process_group` is never called"
        yield Hit(helpers[0], message=message)


def _dist(ctx: FileContext) -> str | None:
    """How the file names `torch.distributed`."""
    aliases = ctx.names.aliases
    for name, target in aliases.items():
        if target == "torch.distributed":
            return name
    torch = next((name for name, target in aliases.items() if target == "torch"), None)
    return f"{torch}.distributed" if torch else None


def _block(ctx: FileContext, call: ast.Call) -> tuple[list[ast.stmt], bool] | None:
    """The statements after which the group can go, and whether the group surely exists there
    (created by a statement of that block). That is after the function that creates it has
    returned, in its one caller, up to the main block: by then the function's DDP wrapper, whose
    Reducer holds a reference to the group, is freed (see the rule's docs). A function with no
    caller in the file (started by `mp.spawn`) or several gets it at its end."""
    scope = ctx.scope(call)
    direct = True
    for _ in range(6):
        if scope == MODULE:
            guard = ctx.main_guard
            block = guard.body if guard is not None else ctx.tree.body
            break
        sites = ctx.callers.get(scope, [])
        if len(sites) != 1 or scope in ctx.spawned:  # also started by `mp.spawn`: it ends there
            block = ctx.idx.functions[scope].node.body
            break
        scope, call = sites[0]
        direct = False  # made in a function: perhaps only when distributed
    else:
        return None
    surely = direct and ctx.statement_of(call) in block and call in ctx.init_calls
    return block, surely


def _ends(stmt: ast.stmt) -> bool:
    """A statement that leaves: the new call goes before it."""
    if isinstance(stmt, ast.Return | ast.Raise):
        return True
    return (
        isinstance(stmt, ast.Expr)
        and isinstance(stmt.value, ast.Call)
        and N.last_name(stmt.value.func) == "exit"
    )


def fix(ctx: FileContext, hit: Hit) -> Fix | None:
    if hit.data == "launcher":
        return None  # the group lives in the launched workers, not after `launch(...)` returns
    dist = _dist(ctx)
    found = _block(ctx, hit.node) if dist else None  # type: ignore[arg-type]  # a hit but a launcher's is the group's init call
    if found is None:
        return None
    block, surely = found
    last = block[-1]
    indent = ctx.text.indent(last)
    if indent is None:
        return None
    destroy = f"{dist}.destroy_process_group()"
    unit = "\t" if "\t" in indent else "    "
    code = [destroy] if surely else [f"if {dist}.is_initialized():", f"{unit}{destroy}"]
    if _ends(last):
        edit = ctx.text.insert_before(last, code)
    else:
        edit = ctx.text.insert_after(last, code, indent)
    return Fix(UNSAFE, f"Call `{destroy}` when training ends", (edit,)) if edit else None
