"""Names a file binds to an imported class or function taken as a value, so that a call through
the name is read as a call of what it names (by every rule, through `FileContext.qual`)."""

from __future__ import annotations

import ast
from collections import defaultdict

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.index import Index

_PARTIAL = frozenset({"functools.partial"})


def value_aliases(idx: Index, names: N.Names) -> dict[str, str]:
    """Names the file binds once, anywhere, to an imported class or function taken as a
    value: `Wrapper = DistributedDataParallel`, `ddp = functools.partial(DDP,
    device_ids=[rank])`, `sampler_cls = DistributedSampler`; a call through the name is a
    call of what it names, for every rule."""
    counts: dict[str, int] = defaultdict(int)
    found: dict[str, str] = {}
    for stmts in idx.assigns.values():
        for stmt in stmts:
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    counts[target.id] += 1
            value = getattr(stmt, "value", None)
            if isinstance(value, ast.Call) and names.qual(value.func) in _PARTIAL:
                value = value.args[0] if value.args else None
            q = names.qual(value) if isinstance(value, ast.Name | ast.Attribute) else None
            if q is not None and len(targets) == 1 and isinstance(targets[0], ast.Name):
                found[targets[0].id] = q
    params = {a for info in idx.functions.values() for a in info.params}
    other = params | set(idx.classes) | {k.rsplit(".", 1)[-1] for k in idx.functions}
    return {
        name: q
        for name, q in found.items()
        if counts[name] == 1 and name not in names.aliases and name not in other and "." in q
    }
