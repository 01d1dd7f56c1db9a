"""A checked file's facts: resolved calls, same-file functions and who calls them, ancestors.

`FileContext` is what every rule receives. It is built from one parse and one walk (`index.py`);
everything else is derived lazily and memoised, so a rule that is not selected costs nothing.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterable, Iterator
from functools import cached_property
from typing import Any, Protocol

from dpwise.lint.analysis import entries
from dpwise.lint.analysis import names as N
from dpwise.lint.analysis.bindings import value_aliases
from dpwise.lint.analysis.index import (
    FUNCTIONS,
    LOOPS,
    MODULE,
    Index,
    build_index,
    is_main_guard,
    pos,
)
from dpwise.lint.fix.edits import Text, split_lines


class ProjectView(Protocol):
    """What a file's context asks of the other modules of its project (`project.Project` answers
    it, reading them from disk). A protocol, so that this module does not import `project`, which
    builds these contexts."""

    def builds_ddp(self, importer: str, module: str, func: str) -> bool: ...
    def creates_group(self, importer: str, module: str, func: str) -> bool: ...
    def launches_group(self, importer: str, module: str, func: str) -> bool: ...
    def mentions(self, importer: str, module: str, func: str, attrs: tuple[str, ...]) -> bool: ...
    def imported_source_mentions(self, ctx: FileContext, words: tuple[str, ...]) -> bool: ...
    def loader_factory(self, importer: str, module: str, func: str) -> tuple[str, int] | None: ...
    def sampler_factory(self, importer: str, module: str, func: str) -> str | None: ...
    def silences_print(self, importer: str, module: str, func: str, depth: int = 0) -> bool: ...
    def stops(self, path: str) -> list[str]: ...
    def runs_as_main(self, importer: str, module: str, func: str) -> bool: ...
    def star_binding(self, importer: str, module: str, name: str) -> str | None: ...


Site = tuple[str, ast.Call]  # (caller scope, call node)
_TARGETS = ("fn", "target")
SCOPE_BOUNDARY = (*FUNCTIONS, ast.Lambda, ast.ClassDef, ast.Module)


class FileContext:
    def __init__(
        self, path: str, source: str, tree: ast.Module, project: ProjectView | None = None
    ) -> None:
        self.path = path
        self.source = source
        self.tree = tree
        self.project = project
        self.idx: Index = build_index(tree)
        self.names = N.Names(N.import_aliases(self.idx.imports), self.idx.bound)
        self.value_aliases = value_aliases(self.idx, self.names)
        self.names.add_aliases(self.value_aliases)
        self._local: dict[ast.AST, str | None] = {}
        self.memo: dict[str, Any] = {}  # answers a rule computes once per file

    # -- names and calls -------------------------------------------------------------------
    def qual(self, expr: ast.AST) -> str | None:
        return self.names.qual(expr)

    @cached_property
    def calls_by_qual(self) -> dict[str, list[ast.Call]]:
        table: dict[str, list[ast.Call]] = defaultdict(list)
        for call in self.idx.all_calls():
            q = self.qual(call.func)
            if q is not None:
                table[q].append(call)
        return table

    def calls_to(self, quals: Iterable[str]) -> list[ast.Call]:
        found = [c for q in quals for c in self.calls_by_qual.get(q, ())]
        return sorted(found, key=pos)

    def calls_named(self, attr: str) -> Iterator[ast.Call]:
        """Calls of a method or function called `attr`, whatever the receiver."""
        if attr not in self.idx.attrs and attr not in self.idx.bound:
            return
        for call in self.idx.all_calls():
            if N.last_name(call.func) == attr:
                yield call

    def scope(self, node: ast.AST) -> str:
        return self.idx.scope_of[node]

    # -- file-level facts --------------------------------------------------------------------
    @cached_property
    def ddp_calls(self) -> list[ast.Call]:
        """`DistributedDataParallel(...)`, and calls of a sibling module's function that returns
        one (`model = smart_ddp(model)` with `def smart_ddp(m): return DDP(m, ...)` in utils.py)."""
        project = self.project
        factories = [
            call
            for call, module, func in self.sibling_calls()
            if project is not None and project.builds_ddp(self.path, module, func)
        ]
        return sorted([*self.calls_to(N.DDP), *factories], key=pos)

    def sibling_calls(self) -> Iterator[tuple[ast.Call, str, str]]:
        """(call, module, function) for calls of a function imported from another module."""
        for call in self.idx.all_calls():
            q = self.qual(call.func) or self.star_qual(call.func)
            if q is None or self.callee(call) is not None or "." not in q.lstrip("."):
                continue
            module, _, func = q.rpartition(".")
            if module.split(".")[0] not in N.NOT_PROJECT:
                yield call, module, func

    @cached_property
    def star_modules(self) -> list[str]:
        """The modules this file imports every name of (`from util import *`)."""
        return [
            "." * i.level + (i.module or "")
            for i in self.idx.imports
            if isinstance(i, ast.ImportFrom) and any(a.name == "*" for a in i.names)
        ]

    def star_qual(self, expr: ast.AST) -> str | None:
        """The dotted name of `utils.init_distributed_mode` where the file never imports `utils`
        itself but gets it from a project module through `from util import *` (whose
        `__init__.py` binds `utils`); None otherwise."""
        if self.project is None or not self.star_modules:
            return None
        parts: list[str] = []
        node = expr
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not parts or not isinstance(node, ast.Name) or node.id in self.idx.bound:
            return None
        for star in self.star_modules:
            bound = self.project.star_binding(self.path, star, node.id)
            if bound is not None:
                return ".".join([bound, *reversed(parts)])
        return None

    @cached_property
    def init_calls(self) -> list[ast.Call]:
        return self.calls_to(N.INIT)

    @cached_property
    def is_script(self) -> bool:
        """Run as a program: an `if __name__ == "__main__":` block, distributed set-up (process
        group, DDP, spawn) at module level, or another entry point (``entry_point``). Library
        modules are none of these."""
        starts = (*N.INIT, *N.DDP, *N.SPAWN)
        return (
            self.has_main_guard
            or any(self.scope(c) == MODULE for c in self.calls_to(starts))
            or self.entry_point is not None
        )

    @cached_property
    def entry_point(self) -> str | None:
        """How the module runs as a program without a `__main__` block (entries.py): "launch"
        (`fire.Fire(main)`, `typer.run(main)` at module level), "decorated" (`@hydra.main`,
        `@click.command`, a Typer app's command), "console script" (the project's
        `pyproject.toml`, `setup.cfg` or `setup.py` names it), else None."""
        if any(self.scope(c) == MODULE for c in self.calls_to(entries.ENTRY_CALLS)):
            return "launch"
        if entries.decorated_entry(self.tree, self.qual) is not None:
            return "decorated"
        if entries.console_script(self.path):
            return "console script"
        return None

    @cached_property
    def is_ddp_script(self) -> bool:
        """One process per rank: builds a DistributedDataParallel, or is a script that starts a
        process group (a library that calls `init_process_group` for its caller is not)."""
        return bool(self.ddp_calls) or (bool(self.init_calls) and self.is_script)

    @cached_property
    def starts_group_by_helper(self) -> bool:
        """A script whose process group comes from a set-up helper of the project
        (`init_distributed()` from `src/utils/distributed.py`)."""
        return self.is_script and any(True for _ in self.group_helper_calls())

    def group_helper_calls(self) -> Iterator[ast.Call]:
        """Calls of another module's function of the project that creates the process group, and
        of a well-known launcher whose workers do (`detectron2.engine.launch`). Another program's
        own main function (the one its `__main__` block runs: a submitit wrapper calling
        `main.main(args)`) is not a set-up helper: what it owns is that program's to clean up."""
        project = self.project
        for call, module, func in self.sibling_calls():
            if f"{module}.{func}" in N.GROUP_LAUNCHERS or (
                project is not None
                and project.creates_group(self.path, module, func)
                and not project.runs_as_main(self.path, module, func)
            ):
                yield call

    def launches_group(self, call: ast.Call) -> bool:
        """Does this helper call create the group only in the workers it starts?"""
        q = self.qual(call.func) or ""
        module, _, func = q.rpartition(".")
        if q in N.GROUP_LAUNCHERS:
            return True
        return self.project is not None and self.project.launches_group(self.path, module, func)

    @cached_property
    def trains(self) -> bool:
        return "backward" in self.idx.attrs

    @cached_property
    def has_main_guard(self) -> bool:
        return self.main_guard is not None

    @cached_property
    def main_guard(self) -> ast.If | None:
        """The module-level `if __name__ == "__main__":` block."""
        return next((n for n in self.idx.ifs.get(MODULE, ()) if is_main_guard(n.test)), None)

    # -- same-file functions -------------------------------------------------------------------
    def function_for(self, name: str, scope: str) -> str | None:
        """The same-file function (or class constructor) a bare name refers to in `scope`."""
        if name in self.names.aliases:
            return None
        fns, chain = self.idx.functions, scope
        while chain != MODULE:
            if f"{chain}.{name}" in fns:
                return f"{chain}.{name}"
            chain = fns[chain].parent if chain in fns else MODULE
        if name in fns:
            return name
        if name in self.idx.classes and f"{name}.__init__" in fns:
            return f"{name}.__init__"
        return None

    def callee(self, call: ast.Call) -> str | None:
        """The key of the same-file function a call runs, if it can be told."""
        if call in self._local:
            return self._local[call]
        scope, func, key = self.idx.scope_of.get(call, MODULE), call.func, None
        if isinstance(func, ast.Name):
            key = self.function_for(func.id, scope)
        elif (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        ):
            cls = self.class_of(scope)
            if cls is not None and f"{cls}.{func.attr}" in self.idx.functions:
                key = f"{cls}.{func.attr}"
        elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            cls = self._instance_of(func.value.id, scope)
            if cls is not None and f"{cls}.{func.attr}" in self.idx.functions:
                key = f"{cls}.{func.attr}"  # `env = DistEnv(); env.init()`
        self._local[call] = key
        return key

    @cached_property
    def _assigned(self) -> dict[tuple[str, str], list[ast.AST]]:
        """(scope, name) -> the values of its plain assignments, in order."""
        table: dict[tuple[str, str], list[ast.AST]] = defaultdict(list)
        for where, stmts in self.idx.assigns.items():
            for stmt in stmts:
                if isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if isinstance(target, ast.Name):
                            table[(where, target.id)].append(stmt.value)
        return table

    def _instance_of(self, name: str, scope: str) -> str | None:
        """The same-file class whose instance `name` holds: its one assignment in the scope (or
        at module level) is `name = Cls(...)`."""
        for where in dict.fromkeys((scope, MODULE)):
            values = self._assigned.get((where, name))
            if values:
                value = values[0] if len(values) == 1 else None
                if (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Name)
                    and value.func.id in self.idx.classes
                    and value.func.id not in self.names.aliases
                ):
                    return value.func.id
                return None
        return None

    def class_of(self, scope: str) -> str | None:
        fns = self.idx.functions
        while scope in fns:
            if fns[scope].class_key is not None:
                return fns[scope].class_key
            scope = fns[scope].parent
        return None

    @cached_property
    def callers(self) -> dict[str, list[Site]]:
        table: dict[str, list[Site]] = defaultdict(list)
        for scope, calls in self.idx.calls.items():
            for call in calls:
                key = self.callee(call)
                if key is not None:
                    table[key].append((scope, call))
        return table

    @cached_property
    def spawned(self) -> dict[str, list[ast.Call]]:
        """Same-file functions started in fresh processes: `mp.spawn(train, ...)`,
        `Process(target=train)`, `start_processes(train, ...)`. Nothing has run in them yet."""
        table: dict[str, list[ast.Call]] = defaultdict(list)
        for scope, calls in self.idx.calls.items():
            for call in calls:
                if not self._starts_processes(call):
                    continue
                for arg in (*call.args[:1], *(k.value for k in call.keywords if k.arg in _TARGETS)):
                    if isinstance(arg, ast.Name):
                        key = self.function_for(arg.id, scope)
                        if key is not None:
                            table[key].append(call)
        return table

    def _starts_processes(self, call: ast.Call) -> bool:
        return self.qual(call.func) in N.SPAWN or N.last_name(call.func) == "Process"

    # -- tree navigation -------------------------------------------------------------------
    def ancestors(self, node: ast.AST) -> Iterator[ast.AST]:
        """Parents up to (not including) the enclosing function, class or module."""
        parents = self.idx.parents
        parent = parents.get(node)
        while parent is not None and not isinstance(parent, SCOPE_BOUNDARY):
            yield parent
            parent = parents.get(parent)

    def statement_of(self, node: ast.AST) -> ast.stmt | None:
        if isinstance(node, ast.stmt):
            return node
        for parent in self.ancestors(node):
            if isinstance(parent, ast.stmt):
                return parent
        return None

    def enclosing_loop(self, node: ast.AST) -> ast.stmt | None:
        """The innermost loop whose body (not its iterable) holds `node`, in the same scope."""
        child = node
        for parent in self.ancestors(node):
            if isinstance(parent, LOOPS) and child in (*parent.body, *parent.orelse):
                return parent
            child = parent
        return None

    def function_node(self, scope: str) -> ast.AST:
        return self.tree if scope == MODULE else self.idx.functions[scope].node

    def body_of(self, scope: str) -> list[ast.stmt]:
        return self.function_node(scope).body  # type: ignore[attr-defined]  # a scope's node is the module or a function: both have a body

    def line_text(self, lineno: int) -> str:
        lines = self.lines
        return lines[lineno - 1] if 0 < lineno <= len(lines) else ""

    @cached_property
    def text(self) -> Text:
        """The source in edit coordinates, for fixes."""
        return Text(self.source)

    @cached_property
    def lines(self) -> list[str]:
        return split_lines(self.source)  # numbered as the parser numbers them
