"""The rooms of src/dpwise and the order they import in: the import-linter contracts of
pyproject.toml hold (`make lint` runs them too), a broken one names its modules, and each room's
__init__.py says truly what imports it and what it imports."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(src: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_the_contracts_hold():
    done = _lint_imports(ROOT / "src")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "0 broken" in done.stdout


def test_an_upward_import_breaks_the_layers_and_is_named(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "dpwise", src / "dpwise", ignore=shutil.ignore_patterns("*.pyc"))
    traits = src / "dpwise" / "strategies" / "traits.py"
    traits.write_text(traits.read_text() + "\nfrom dpwise.train import config  # noqa\n")
    done = _lint_imports(src)
    assert done.returncode == 1
    assert "dpwise.strategies is not allowed to import dpwise.train" in done.stdout
    assert "dpwise.strategies.traits -> dpwise.train.config" in done.stdout
    assert "may import only the rooms listed below it" in done.stdout


def _rooms_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    graph = grimp.build_graph("dpwise")
    imports: dict[str, set[str]] = defaultdict(set)
    importers: dict[str, set[str]] = defaultdict(set)
    for module in graph.modules:
        for target in graph.find_modules_directly_imported_by(module):
            a, b = (m.split(".")[1] if "." in m else "" for m in (module, target))
            if a and b and a != b:
                imports[a].add(b)
                importers[b].add(a)
    return imports, importers


def _said(doc: str, label: str) -> set[str]:
    match = re.search(rf"^{label}: (.*?)(?=^\w[\w ]*: |^$|\Z)", doc, re.M | re.S)
    assert match, f"no '{label}:' line"
    text = re.sub(r"\([^)]*\)", "", match.group(1).replace("\n", " "))
    return {w.strip(" .") for w in text.split(",") if w.strip(" .")}


ROOMS = sorted(p.parent.name for p in (ROOT / "src" / "dpwise").glob("*/__init__.py"))


@pytest.mark.parametrize("room", ROOMS)
def test_each_room_says_what_it_owns_imports_and_is_imported_by(room):
    import importlib

    doc = importlib.import_module(f"dpwise.{room}").__doc__ or ""
    assert doc.startswith("Owns: "), f"dpwise.{room}'s docstring starts with 'Owns:'"
    imports, importers = _rooms_graph()
    may, by = _said(doc, "May import"), _said(doc, "Imported by")
    if may != {"any room below it"}:  # the layers contract says which those are
        assert imports[room] <= _rooms(may), f"dpwise.{room} imports {imports[room] - may} too"
    assert _rooms(by) == importers[room]


def _rooms(said: set[str]) -> set[str]:
    """The rooms a docstring names ("nothing ..." names none)."""
    return set() if any(s.startswith("nothing") for s in said) else said
