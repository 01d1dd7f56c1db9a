"""What a script imports from its sibling modules, read (never imported) on demand and cached.

Four questions are asked across files: does `from common import get_dataloader` bring in a
function that builds a `DataLoader` with no sampler and no notion of ranks? Does
`from utils import init_distributed_mode` bring in a set-up helper that replaces `builtins.print`
(so that a plain `print` after it is silent on the other ranks)? Does a set-up helper call
`init_process_group` (then the script owns the group)? Does a factory such as
`smart_ddp(model)` return a `DistributedDataParallel`? The module is looked up
the way Python finds it when the script is run directly: beside the script (`common.py` or
`common/__init__.py`), or relative to it for `from .data import ...`; an absolute import is also
looked up one and two folders up (the project's own package, from `scripts/train.py`).
"""

from __future__ import annotations

import ast
import os
from collections.abc import Callable
from pathlib import Path

from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.context import FileContext
from dpwise.lint.analysis.flow import Flow
from dpwise.lint.analysis.offers import (
    Factories,
    ddp_factories,
    group_launchers,
    group_makers,
    loader_factories,
    print_silencers,
    public,
    reexports,
    sampler_factories,
)

CALL_DEPTH = 4  # modules followed from a script's call to the one that creates the group
REEXPORT_DEPTH = 3  # a package's __init__.py re-exporting from a submodule, and so on


class Project:
    def __init__(self) -> None:
        self._factories: dict[str, tuple[str, Factories]] = {}
        self._silencers: dict[str, frozenset[str]] = {}
        self._modules: dict[str, FileContext | None] = {}
        self._group_makers: dict[str, frozenset[str]] = {}
        self._launchers: dict[str, frozenset[str]] = {}
        self._ddp_factories: dict[str, frozenset[str]] = {}
        self._sampler_factories: dict[str, dict[str, int]] = {}
        # (question, module path, function): the answer through further modules
        self._deep: dict[tuple[str, str, str], bool] = {}
        self._bounded: dict[tuple[str, str, str], bool] = {}  # its search reached CALL_DEPTH
        self._stops: dict[str, list[str]] = {}  # linted file -> helpers whose search stopped

    def module_path(self, importer: str, module: str) -> str | None:
        level = len(module) - len(module.lstrip("."))
        parts = module.lstrip(".").split(".")
        base = os.path.dirname(importer)
        for _ in range(max(level - 1, 0)):
            base = os.path.dirname(base)
        # an absolute import may also name the project's own package from a script one or two
        # folders down (repo/scripts/train.py importing repo/pkg/dist_util.py)
        parent = os.path.dirname(base)
        bases = [base] if level else [base, parent, os.path.dirname(parent)]
        for folder in bases:
            for candidate in (
                os.path.join(folder, *parts) + ".py",
                os.path.join(folder, *parts, "__init__.py"),
            ):
                if os.path.isfile(candidate):
                    return candidate
        return None

    def loader_factory(self, importer: str, module: str, func: str) -> tuple[str, int] | None:
        """(path, line) of the unsharded DataLoader built by `module.func`, if it is one."""
        if module.split(".")[0] in N.NOT_PROJECT:
            return None
        importer, module, func = self.defining(importer, module, func)
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._factories:
            path = self.module_path(importer, module)
            self._factories[key] = (path or "", _factories(path) if path else {})
        path, factories = self._factories[key]
        return (path, factories[func]) if func in factories else None

    def silences_print(self, importer: str, module: str, func: str, depth: int = 0) -> bool:
        """Does `module.func` replace `builtins.print` (directly, through its own helpers, or
        through further modules of the project, CALL_DEPTH deep)?"""
        if module.split(".")[0] in N.NOT_PROJECT:
            return False
        importer, module, func = self.defining(importer, module, func)
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._silencers:
            path = self.module_path(importer, module)
            ctx = _context(path) if path else None
            self._silencers[key] = print_silencers(ctx) if ctx is not None else frozenset()
        if func in self._silencers[key]:
            return True
        return self._through_modules(importer, module, func, depth, self.silences_print)

    def _module(self, importer: str, module: str) -> FileContext | None:
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._modules:
            path = self.module_path(importer, module)
            self._modules[key] = _context(path) if path else None
        return self._modules[key]

    def launches_group(self, importer: str, module: str, func: str, depth: int = 0) -> bool:
        """Does `func` create the group only in the workers it starts (`launch(main, n)`)?"""
        return self._names(self._launchers, group_launchers, importer, module, func, depth)

    def creates_group(self, importer: str, module: str, func: str, depth: int = 0) -> bool:
        """Does the sibling module's function `func` call `init_process_group` (directly, through
        its own module's functions, in the workers it starts, or through functions of further
        modules of the project, CALL_DEPTH modules deep)? A package's `__init__.py` that
        re-exports the function (`from .launch import launch`, `from .launch import *`) is
        followed to the module that defines it."""
        if self._names(self._group_makers, group_makers, importer, module, func, depth):
            return True
        found = self._through_modules(importer, module, func, depth, self.creates_group)
        if depth == 0 and not found:
            ctx = self._module(importer, module)
            if ctx is not None and self._bounded.get(("creates_group", ctx.path, func)):
                self._stops.setdefault(importer, []).append(f"{module}.{func}")
        return found

    def star_binding(self, importer: str, module: str, name: str) -> str | None:
        """The module that `module` binds to `name` by an import (`import util.utils as utils`,
        `from . import utils`), as the importer would name it; None when it binds none."""
        ctx = self._module(importer, module)
        if ctx is None or module.startswith("."):
            return None
        package = module if ctx.path.endswith("__init__.py") else module.rpartition(".")[0]
        for imp in ctx.idx.imports:
            for alias in imp.names:
                if (alias.asname or alias.name.split(".")[0]) != name:
                    continue
                if isinstance(imp, ast.Import):
                    return alias.name if alias.asname else name
                anchor = package
                for _ in range(max(imp.level - 1, 0)):
                    anchor = anchor.rpartition(".")[0]
                base = imp.module or ""
                if imp.level:
                    base = ".".join(p for p in (anchor, imp.module or "") if p)
                return ".".join(p for p in (base, alias.name) if p)
        return None

    def runs_as_main(self, importer: str, module: str, func: str) -> bool:
        """Is `module.func` what that module's own `if __name__ == "__main__":` block calls?"""
        importer, module, func = self.defining(importer, module, func)
        ctx = self._module(importer, module)
        guard = ctx.main_guard if ctx is not None else None
        return guard is not None and any(
            isinstance(n, ast.Call) and N.last_name(n.func) == func
            for stmt in guard.body
            for n in ast.walk(stmt)
        )

    def stops(self, path: str) -> list[str]:
        """The helpers of file ``path`` whose search for a process group reached CALL_DEPTH
        modules and stopped there (what lies further was not read)."""
        return list(dict.fromkeys(self._stops.get(path, [])))

    def _through_modules(
        self, importer: str, module: str, func: str, depth: int, ask: Callable[..., bool]
    ) -> bool:
        """`func` reaches a call of another project module's function for which ``ask``
        (`creates_group`, `silences_print`) says yes (`init_dist(launcher)` ->
        `_init_dist_pytorch()` imported from a third module). Bounded by CALL_DEPTH; a cycle of
        imports answers no."""
        ctx = self._module(importer, module)
        if ctx is None:
            return False
        key = (ask.__name__, ctx.path, func)
        if depth >= CALL_DEPTH:
            self._bounded[key] = True  # a module further down that was not read
            return False
        if key in self._deep:
            return self._deep[key]
        self._deep[key] = False  # while it is being answered: a cycle back here says no

        def makes(c: FileContext, call: ast.Call) -> bool:
            if c.callee(call) is not None:
                return False
            q = c.qual(call.func) or ""
            sub, _, name = q.rpartition(".")
            if not sub or sub.split(".")[0] in N.NOT_PROJECT:
                return False
            if ask(c.path, sub, name, depth + 1):
                return True
            below = self._module(c.path, sub)
            if below is not None and self._bounded.get((ask.__name__, below.path, name)):
                self._bounded[key] = True
            return False

        self._deep[key] = func in public(ctx, Flow(ctx, makes))
        return self._deep[key]

    def _names(
        self,
        table: dict[str, frozenset[str]],
        find: Callable[[FileContext], frozenset[str]],
        importer: str,
        module: str,
        func: str,
        depth: int,
    ) -> bool:
        """Is `func` among the names `find` picks out of the module (memoised in `table`),
        following a package's re-exports two levels deep?"""
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in table:
            ctx = self._module(importer, module)
            table[key] = find(ctx) if ctx is not None else frozenset()
        if func in table[key]:
            return True
        ctx = self._module(importer, module)
        if ctx is None or depth >= 2:
            return False
        return any(
            self._names(table, find, ctx.path, source, name, depth + 1)
            for source, name in reexports(ctx, func)
        )

    def builds_ddp(self, importer: str, module: str, func: str) -> bool:
        """Does the sibling module's function `func` return a `DistributedDataParallel`?"""
        importer, module, func = self.defining(importer, module, func)
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._ddp_factories:
            ctx = self._module(importer, module)
            self._ddp_factories[key] = ddp_factories(ctx) if ctx is not None else frozenset()
        return func in self._ddp_factories[key]

    def mentions(self, importer: str, module: str, func: str, attrs: tuple[str, ...]) -> bool:
        """Does the sibling module's function `func` use one of `attrs` (`module.no_sync()` in a
        `ddp_sync(module, sync)` context manager)?"""
        ctx = self._module(importer, module)
        info = ctx.idx.functions.get(func) if ctx is not None else None
        return info is not None and any(
            isinstance(n, ast.Attribute) and n.attr in attrs for n in ast.walk(info.node)
        )

    def imported_source_mentions(self, ctx: FileContext, words: tuple[str, ...]) -> bool:
        """Does a module of the project that `ctx` imports (`import resnet`, `from models
        import vit`) contain one of `words` (`BatchNorm`, `register_buffer`)?"""
        for imp in ctx.idx.imports:
            if isinstance(imp, ast.Import):
                modules = [alias.name for alias in imp.names]
            else:
                base = "." * imp.level + (imp.module or "")
                sep = "." if imp.module else ""
                modules = [base, *(f"{base}{sep}{alias.name}" for alias in imp.names)]
            for module in modules:
                root = module.lstrip(".").split(".")[0]
                if not root or root in N.NOT_PROJECT:
                    continue
                other = self._module(ctx.path, module)
                if other is not None and any(word in other.source for word in words):
                    return True
        return False

    def defining(self, importer: str, module: str, func: str) -> tuple[str, str, str]:
        """(importer, module, name) where `module.func` is defined: a package's `__init__.py`
        that re-exports it (`from .samplers import get_sampler`, `from .samplers import *`) is
        followed to the module that defines it, REEXPORT_DEPTH re-exports deep (as given where
        nothing defines it)."""
        for _ in range(REEXPORT_DEPTH):
            ctx = self._module(importer, module)
            if ctx is None or func in ctx.idx.functions:
                break
            found = reexports(ctx, func)
            if not found:
                break
            (module, func), importer = found[0], ctx.path
        return importer, module, func

    def sampler_factory(self, importer: str, module: str, func: str) -> str | None:
        """`path:line` of the shuffling `DistributedSampler` that `module.func` builds and hands
        back to its caller (who then owns `set_epoch`), if it is one."""
        importer, module, func = self.defining(importer, module, func)
        key = f"{os.path.dirname(importer)}|{module}"
        if key not in self._sampler_factories:
            ctx = self._module(importer, module)
            self._sampler_factories[key] = sampler_factories(ctx) if ctx is not None else {}
        line = self._sampler_factories[key].get(func)
        if line is None:
            return None
        return f"{self.module_path(importer, module)}:{line}"


def _context(path: str) -> FileContext | None:
    try:
        source = Path(path).read_text(encoding="utf-8")
        tree = ast.parse(source, filename=path)
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, RecursionError):
        return None
    return FileContext(path, source, tree)


def _factories(path: str) -> Factories:
    ctx = _context(path)
    return loader_factories(ctx) if ctx is not None else {}
