"""The house's size rules, read from src/ (ARCHITECTURE.md, house rules): no function over 60
lines, and compare's convergence check within 200 lines."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "dpwise"
LONGEST = 60


def test_no_function_in_src_is_over_60_lines():
    long = []
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > LONGEST:
                    long.append(f"{path.relative_to(SRC)}:{node.name} ({lines} lines)")
    assert not long, long


def test_the_convergence_check_stays_small():
    path = SRC / "compare" / "checks" / "convergence.py"
    assert len(path.read_text(encoding="utf-8").splitlines()) <= 200
