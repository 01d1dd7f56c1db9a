"""What a script imports from its sibling modules, read (never imported) on demand and cached.

Only one question is asked across files: does `from common import get_dataloader` bring in a
function that builds a `DataLoader` with no sampler and no notion of ranks? The module is looked up
the way Python finds it when the script is run directly: beside the script (`common.py` or
`common/__init__.py`), or relative to it for `from .data import ...`.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from dpwise.lint import names as N
from dpwise.lint.analysis import FileContext
from dpwise.lint.index import MODULE
from dpwise.lint.loaders import has_sampler, rank_aware, says_eval

Factories = dict[str, int]  # function name -> line of its DataLoader call


class Project:
    def __init__(self) -> None:
        self._factories: dict[str, tuple[str, Factories]] = {}

    def module_path(self, importer: str, module: str) -> str | None:
        level = len(module) - len(module.lstrip("."))
        parts = module.lstrip(".").split(".")
        base = os.path.dirname(importer)
        for _ in range(max(level - 1, 0)):
            base = os.path.dirname(base)
        for candidate in (
            os.path.join(base, *parts) + ".py",
            os.path.join(base, *parts, "__init__.py"),
        ):
            if os.path.isfile(candidate):
                return candidate
        return None

    def loader_factory(self, importer: str, module: str, func: str) -> tuple[str, int] | None:
        """(path, line) of the unsharded DataLoader built by `module.func`, if it is one."""
        if module.split(".")[0] in ("torch", "os", "sys", "numpy", "np"):
            return None
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._factories:
            path = self.module_path(importer, module)
            self._factories[key] = (path or "", _factories(path) if path else {})
        path, factories = self._factories[key]
        return (path, factories[func]) if func in factories else None


def _factories(path: str) -> Factories:
    try:
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source, filename=path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        return {}
    return loader_factories(FileContext(path, source, tree))


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
