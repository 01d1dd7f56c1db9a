"""Is a module run as a program without an `if __name__ == "__main__":` block?

A training module is often started another way:

- a decorated entry function: `@hydra.main(...)`, `@click.command()` / `@click.group()`, a Typer
  app's `@app.command()`;
- a module-level launch: `fire.Fire(main)`, `typer.run(main)`;
- a console script of the project (`[project.scripts]` in `pyproject.toml`, `[options.entry_points]`
  in `setup.cfg`, `entry_points={"console_scripts": [...]}` in `setup.py`) that names the module:
  `train = "mypkg.train:main"` makes `mypkg/train.py` (or `src/mypkg/train.py`) a program.

The project file is the nearest `pyproject.toml`, `setup.cfg` or `setup.py` above the module, at
most MAX_UP folders up; each is read once (never executed: `setup.py` is parsed).
"""

from __future__ import annotations

import ast
import configparser
import os
import re
from collections.abc import Callable
from functools import lru_cache

ENTRY_DECORATORS = frozenset({"hydra.main", "click.command", "click.group"})
ENTRY_CALLS = frozenset({"fire.Fire", "typer.run"})
PROJECT_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
MAX_UP = 6  # folders looked up for a project file
_TARGET = re.compile(r"^\s*[\w.\-\[\]]+\s*=\s*(?P<module>[\w.]+)\s*(?::\s*[\w.]+)?\s*$")


def decorated_entry(tree: ast.Module, qual: Callable[[ast.AST], str | None]) -> str | None:
    """The name of a module-level function decorated as a program's entry (`@hydra.main`,
    `@click.command`, a Typer app's `@app.command`), else None. ``qual`` resolves a name to
    its dotted import path (FileContext.qual)."""
    typer_apps = _typer_apps(tree, qual)
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            name = qual(target) or ""
            if name in ENTRY_DECORATORS:
                return node.name
            if (
                isinstance(target, ast.Attribute)
                and target.attr in ("command", "callback")
                and isinstance(target.value, ast.Name)
                and target.value.id in typer_apps
            ):
                return node.name
    return None


def _typer_apps(tree: ast.Module, qual: Callable[[ast.AST], str | None]) -> set[str]:
    """Module-level names bound to `typer.Typer(...)`."""
    apps = set()
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and qual(node.value.func) == "typer.Typer"
        ):
            apps |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return apps


def console_script(path: str) -> bool:
    """Does the project around ``path`` declare a console script that runs this module?"""
    here = os.path.dirname(os.path.abspath(path))
    for _ in range(MAX_UP):
        for name in PROJECT_FILES:
            candidate = os.path.join(here, name)
            if os.path.isfile(candidate):
                modules = _declared(candidate)
                if modules:
                    return _module_of(path, here) in modules
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    return False


def _module_of(path: str, root: str) -> str:
    """`mypkg.train` for ROOT/mypkg/train.py or ROOT/src/mypkg/train.py."""
    rel = os.path.relpath(os.path.abspath(path), root)
    parts = rel[: -len(".py")].split(os.sep) if rel.endswith(".py") else rel.split(os.sep)
    if parts and parts[0] == "src":
        parts = parts[1:]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


@lru_cache(maxsize=256)
def _declared(project_file: str) -> frozenset[str]:
    """The modules the project's console scripts run (`pkg.mod` of `name = pkg.mod:func`)."""
    try:
        with open(project_file, encoding="utf-8", errors="replace") as fh:
            text = fh.read(1 << 20)
    except OSError:
        return frozenset()
    if project_file.endswith(".toml"):
        lines = _toml_scripts(text)
    elif project_file.endswith(".cfg"):
        lines = _cfg_scripts(text)
    else:
        lines = _setup_py_scripts(text)
    found = set()
    for line in lines:
        match = _TARGET.match(line)
        if match:
            found.add(match.group("module"))
    return frozenset(found)


def _toml_scripts(text: str) -> list[str]:
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]  # Python 3.11+; mypy reads the code as 3.10's
    except ImportError:  # Python 3.10
        return []
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return []
    scripts = dict(data.get("project", {}).get("scripts", {}) or {})
    scripts.update(data.get("tool", {}).get("poetry", {}).get("scripts", {}) or {})
    return [f"{k} = {v}" for k, v in scripts.items() if isinstance(v, str)]


def _cfg_scripts(text: str) -> list[str]:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
        value = parser.get("options.entry_points", "console_scripts", fallback="")
    except (configparser.Error, ValueError):
        return []
    return [line for line in value.splitlines() if line.strip()]


def _setup_py_scripts(text: str) -> list[str]:
    """`"name = pkg.mod:func"` strings in a `console_scripts` list of `setup(entry_points=...)`."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if isinstance(key, ast.Constant) and key.value == "console_scripts":
                    found += _strings(value)
    return found


def _strings(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.splitlines()
    if isinstance(node, ast.List | ast.Tuple):
        return [s for elt in node.elts for s in _strings(elt)]
    return []
