"""What one module of the project offers the scripts that import it, found in that module alone:
functions that make the process group (or start workers that do), replace `builtins.print`,
return a `DistributedDataParallel`, or build a training `DataLoader` or a shuffling
`DistributedSampler` for their caller; and the names a package's `__init__.py` re-exports.
`project.Project` asks these of each module it reads, and follows the modules further."""

from __future__ import annotations

import ast

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import Flow
from dpwise.lint.analysis.index import MODULE
from dpwise.lint.analysis.loaders import (
    has_sampler,
    in_factory,
    rank_aware,
    says_eval,
    shuffling_samplers,
)
from dpwise.lint.analysis.wrappers import Wrappers

Factories = dict[str, int]  # function name -> line of its DataLoader call


def replaces_print(fn: ast.AST) -> bool:
    """`builtins.print = ...` (or `__builtin__.print`, `__builtins__["print"]`) in `fn`."""
    for node in ast.walk(fn):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Attribute) and target.attr == "print":
                owner = target.value
                if isinstance(owner, ast.Name) and owner.id in ("builtins", "__builtin__"):
                    return True
            if (
                isinstance(target, ast.Subscript)
                and N.str_value(target.slice) == "print"
                and N.last_name(target.value) == "__builtins__"
            ):
                return True
    return False


def print_silencers(ctx: FileContext) -> frozenset[str]:
    """Module-level functions that replace `builtins.print`, directly or through another."""
    direct = {k for k, info in ctx.idx.functions.items() if replaces_print(info.node)}
    found, changed = set(direct), True
    while changed:
        changed = False
        for key in ctx.idx.functions:
            if key not in found and any(ctx.callee(c) in found for c in ctx.idx.calls.get(key, ())):
                found.add(key)
                changed = True
    return frozenset(k for k in found if ctx.idx.functions[k].parent == MODULE)


def ddp_factories(ctx: FileContext) -> frozenset[str]:
    """Module-level functions that return a `DistributedDataParallel` they build."""
    wrappers = Wrappers(ctx)
    return frozenset(
        key
        for key, info in ctx.idx.functions.items()
        if info.parent == MODULE
        and info.class_key is None
        and wrappers.returns(key) == "DistributedDataParallel"
    )


def public(ctx: FileContext, flow: Flow) -> frozenset[str]:
    return frozenset(
        key
        for key, info in ctx.idx.functions.items()
        if info.parent == MODULE and info.class_key is None and flow.reaches(key)
    )


def group_makers(ctx: FileContext) -> frozenset[str]:
    """Module-level functions that create a process group when called, or that start workers
    which do (`launch(main)` spawning a `_worker` that calls `init_process_group`)."""
    return public(ctx, Flow(ctx, lambda c, call: c.qual(call.func) in N.INIT)) | group_launchers(
        ctx
    )


def group_launchers(ctx: FileContext) -> frozenset[str]:
    """Module-level functions that create the process group only in the workers they start."""
    plain = Flow(ctx, lambda c, call: c.qual(call.func) in N.INIT)
    starts = {
        id(call) for key, calls in ctx.spawned.items() if plain.reaches(key) for call in calls
    }
    if not starts:
        return frozenset()
    return public(ctx, Flow(ctx, lambda c, call: id(call) in starts)) - public(ctx, plain)


def reexports(ctx: FileContext, func: str) -> list[tuple[str, str]]:
    """(relative module, name there) for `from .launch import launch` / `from .launch import *`
    lines through which a package's `__init__.py` offers `func`."""
    found = []
    for imp in ctx.idx.imports:
        if not isinstance(imp, ast.ImportFrom) or not imp.level:
            continue
        source = "." * imp.level + (imp.module or "")
        for alias in imp.names:
            if alias.name == "*" or (alias.asname or alias.name) == func:
                found.append((source, func if alias.name == "*" else alias.name))
    return found


def loader_factories(ctx: FileContext) -> Factories:
    """Module-level functions that build a training DataLoader with no sampler and never
    mention ranks, samplers, shards or world sizes."""
    found: Factories = {}
    for call in ctx.calls_to(N.DATALOADER):
        scope = ctx.scope(call)
        info = ctx.idx.functions.get(scope)
        if info is None or info.parent != MODULE or info.class_key is not None:
            continue
        if has_sampler(call) or says_eval(scope) or rank_aware(info.node):
            continue
        found.setdefault(scope, call.lineno)
    return found


def sampler_factories(ctx: FileContext) -> dict[str, int]:
    """Module-level functions that build a shuffling `DistributedSampler` and return it (or a
    loader made from it) without iterating it: function name -> line of the sampler."""
    found: dict[str, int] = {}
    for call in shuffling_samplers(ctx):
        scope = ctx.scope(call)
        info = ctx.idx.functions.get(scope)
        if info is None or info.parent != MODULE or info.class_key is not None:
            continue
        if in_factory(ctx, call):
            found.setdefault(scope, call.lineno)
    return found
