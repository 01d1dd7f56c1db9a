"""`dpwise lint` on hostile inputs: deep nesting, FIFOs, huge files, an empty --select."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli
from dpwise.lint import lint_paths
from dpwise.lint.files import MAX_FILE_BYTES

BAD = 'import os\nos.environ["MASTER_PORT"] = "29500"\n'  # DPW008


def _deep(n: int = 3000) -> str:
    return "import torch\nx = torch.tensor(" + "-" * n + "1)\n"


def test_deeply_nested_file_is_one_finding_and_the_rest_are_checked(tmp_path: Path) -> None:
    (tmp_path / "a_deep.py").write_text(_deep(3000))
    (tmp_path / "b_deeper.py").write_text(_deep(50_000))  # MemoryError rather than recursion
    (tmp_path / "c_bad.py").write_text(BAD)
    result = run_cli("lint", str(tmp_path), "--format", "json", timeout=120)
    assert result.returncode == 1, result.stderr
    found = [(Path(f["path"]).name, f["code"], f["name"]) for f in json.loads(result.stdout)]
    assert found == [
        ("a_deep.py", "DPW016", "file-not-checked"),
        ("b_deeper.py", "DPW016", "file-not-checked"),
        ("c_bad.py", "DPW008", "hardcoded-master-port"),
    ]
    assert "nested too deeply" in json.loads(result.stdout)[0]["message"]


def test_fifo_in_a_folder_is_skipped_and_named(tmp_path: Path) -> None:
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    os.mkfifo(tmp_path / "a_pipe.py")  # nobody ever writes: reading it would block forever
    (tmp_path / "b_bad.py").write_text(BAD)
    result = run_cli("lint", str(tmp_path), "--format", "concise", timeout=60)
    assert result.returncode == 1
    assert "b_bad.py:2:1: DPW008" in result.stdout
    assert result.stderr.strip().splitlines() == [
        f"dpwise lint: skipped {tmp_path / 'a_pipe.py'}: not a regular file"
    ]
    named = run_cli("lint", str(tmp_path / "a_pipe.py"), timeout=60)
    assert named.returncode == 2 and named.stdout == ""
    assert len(named.stderr.strip().splitlines()) == 1
    assert "not a regular file" in named.stderr


def test_file_over_the_size_limit_is_reported_not_parsed(tmp_path: Path) -> None:
    line = 'os.environ["MASTER_PORT"] = "29500"\n'
    (tmp_path / "huge.py").write_text("import os\n" + line * (MAX_FILE_BYTES // len(line) + 1))
    (tmp_path / "small.py").write_text(BAD)
    found = lint_paths([str(tmp_path)])
    assert [(Path(f.path).name, f.code) for f in found] == [
        ("huge.py", "DPW016"),
        ("small.py", "DPW008"),
    ]
    assert "over the 1 MiB limit" in found[0].message
    assert [f.code for f in lint_paths([str(tmp_path)], ignore=["file-not-checked"])] == ["DPW008"]


@pytest.mark.parametrize("select", ["", ","])
def test_empty_select_is_a_usage_error(tmp_path: Path, select: str) -> None:
    (tmp_path / "bad.py").write_text(BAD)
    result = run_cli("lint", str(tmp_path), "--select", select, timeout=60)
    assert (result.returncode, result.stdout) == (2, "")
    assert len(result.stderr.strip().splitlines()) == 1
    assert "names no rule" in result.stderr


def test_fix_on_hostile_files_changes_only_what_it_can_fix(tmp_path: Path) -> None:
    """--fix --unsafe-fixes over deep nesting, an oversized file, undecodable bytes, a syntax
    error (Python-2 style) and a fixable file: one finding or one error line each, no crash,
    only the fixable file rewritten."""
    hostile = {
        "a_deep.py": _deep(3000).encode(),
        "b_huge.py": b"import os\n" + b"x = 1\n" * (MAX_FILE_BYTES // 6 + 1),
        "c_binary.py": b"import torch\n\xff\xfe\x00bad bytes\n",
        "d_py2.py": b"import torch\nx = y.cuda(async=True)\n",
        "e_empty.py": b"",
    }
    for name, data in hostile.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "f_bad.py").write_text(BAD)
    result = run_cli(
        "lint", str(tmp_path), "--fix", "--unsafe-fixes", "--format", "json", timeout=120
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr == ""
    found = sorted((Path(f["path"]).name, f["code"]) for f in json.loads(result.stdout))
    assert found == [
        ("a_deep.py", "DPW016"),
        ("b_huge.py", "DPW016"),
        ("c_binary.py", "DPW000"),
        ("d_py2.py", "DPW000"),
    ]
    for name, data in hostile.items():
        assert (tmp_path / name).read_bytes() == data, name
    fixed = (tmp_path / "f_bad.py").read_text()
    assert fixed == 'import os\nos.environ.setdefault("MASTER_PORT", "29500")\n'
