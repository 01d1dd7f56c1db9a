"""`dpwise lint --fix / --unsafe-fixes / --diff / --show-fixes`, and fixes in JSON and SARIF."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from dpwise.commands.lint import run
from test_lint_output import parse

# One safe fix (deprecated-amp-api, twice), one unsafe (hardcoded-master-port), one finding
# without a fix (missing-set-device is reported; the file has a comment by each edit).
SCRIPT = """\
import os

import torch
import torch.distributed as dist

os.environ["MASTER_PORT"] = "29500"  # port
scaler = torch.cuda.amp.GradScaler()  # scaler
with torch.cuda.amp.autocast():  # autocast
    pass
dist.init_process_group("gloo")
dist.destroy_process_group()
"""
SAFE_FIXED = SCRIPT.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")').replace(
    "torch.cuda.amp.autocast()", 'torch.amp.autocast("cuda")'
)
ALL_FIXED = SAFE_FIXED.replace(
    'os.environ["MASTER_PORT"] = "29500"', 'os.environ.setdefault("MASTER_PORT", "29500")'
)


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(SCRIPT, encoding="utf-8")
    return path


def test_fix_applies_the_safe_fixes_and_reports_the_rest(script: Path, capsys) -> None:
    assert run(parse(str(script), "--fix", "--format", "concise")) == 1
    assert script.read_text(encoding="utf-8") == SAFE_FIXED
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{script}:6:1: DPW008 [hardcoded-master-port]")
    assert out[-2:] == [
        "Found 3 issues (2 fixed, 1 remaining).",
        "No fixes available (1 hidden fix can be enabled with the `--unsafe-fixes` option).",
    ]


def test_unsafe_fixes_apply_the_rest_and_a_second_fix_changes_nothing(script: Path, capsys) -> None:
    assert run(parse(str(script), "--fix", "--unsafe-fixes", "--format", "concise")) == 0
    assert script.read_text(encoding="utf-8") == ALL_FIXED
    assert capsys.readouterr().out == "Found 3 issues (3 fixed, 0 remaining).\n"
    before = script.stat().st_mtime_ns
    assert run(parse(str(script), "--fix", "--unsafe-fixes", "--format", "concise")) == 0
    assert capsys.readouterr().out == "All checks passed!\n"
    assert script.read_text(encoding="utf-8") == ALL_FIXED and script.stat().st_mtime_ns == before


def test_diff_prints_a_unified_diff_and_writes_nothing(script: Path, capsys) -> None:
    before = script.stat().st_mtime_ns
    assert run(parse(str(script), "--diff")) == 1
    captured = capsys.readouterr()
    assert captured.out.startswith(f"--- {script}\n+++ {script}\n@@ ")
    assert "-scaler = torch.cuda.amp.GradScaler()  # scaler\n" in captured.out
    assert '+scaler = torch.amp.GradScaler("cuda")  # scaler\n' in captured.out
    assert "setdefault" not in captured.out  # unsafe: not without --unsafe-fixes
    assert captured.err == "Would fix 2 issues (1 more with `--unsafe-fixes`).\n"
    assert script.read_text(encoding="utf-8") == SCRIPT and script.stat().st_mtime_ns == before
    assert run(parse(str(script), "--diff", "--unsafe-fixes")) == 1
    assert '+os.environ.setdefault("MASTER_PORT", "29500")  # port\n' in capsys.readouterr().out


def test_diff_on_a_file_without_fixes_exits_0(tmp_path: Path, capsys) -> None:
    path = tmp_path / "ok.py"
    path.write_text("import torch\nprint(torch.ones(1))\n", encoding="utf-8")
    assert run(parse(str(path), "--diff")) == 0
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "No fixes available.\n")


def test_show_fixes_lists_per_file_and_rule(script: Path, capsys) -> None:
    assert run(parse(str(script), "--fix", "--show-fixes", "--format", "concise")) == 1
    out = capsys.readouterr().out
    assert out.endswith(f"Fixed 2 issues:\n- {script}:\n    2 × DPW013 (deprecated-amp-api)\n")
    script.write_text(SCRIPT, encoding="utf-8")
    assert run(parse(str(script), "--show-fixes", "--unsafe-fixes", "--format", "concise")) == 1
    out = capsys.readouterr().out
    assert "[*] 3 fixable with the `--fix --unsafe-fixes` option." in out
    assert out.endswith(
        f"Would fix 3 issues:\n- {script}:\n    1 × DPW008 (hardcoded-master-port)\n"
        "    2 × DPW013 (deprecated-amp-api)\n"
    )
    assert script.read_text(encoding="utf-8") == SCRIPT


def _apply_json_edits(source: str, fix: dict) -> str:
    lines = source.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    out = source
    for edit in sorted(fix["edits"], key=lambda e: -starts[e["location"]["row"] - 1]):
        a = starts[edit["location"]["row"] - 1] + edit["location"]["column"] - 1
        b = starts[edit["end_location"]["row"] - 1] + edit["end_location"]["column"] - 1
        out = out[:a] + edit["content"] + out[b:]
    return out


def test_json_carries_applicability_and_edits_that_reproduce_the_fix(script, capsys) -> None:
    assert run(parse(str(script), "--format", "json")) == 1
    findings = json.loads(capsys.readouterr().out)
    by_code = {f["code"]: f for f in findings}
    assert [f["fix_applicability"] for f in findings] == ["unsafe", "safe", "safe"]
    assert by_code["DPW008"]["fix"]["applicability"] == "unsafe"
    source = SCRIPT
    for finding in reversed(findings):  # later edits first, so positions stay valid
        source = _apply_json_edits(source, finding["fix"])
    assert source == ALL_FIXED
    path = script.parent / "plain.py"
    path.write_text("import torch\nmodel = torch.nn.DataParallel(net)\n", encoding="utf-8")
    run(parse(str(path), "--format", "json"))
    (finding,) = json.loads(capsys.readouterr().out)
    assert (finding["fix_applicability"], finding["fix"]) == ("none", None)


def test_sarif_results_carry_fixes(script: Path, capsys) -> None:
    assert run(parse(str(script), "--format", "sarif")) == 1
    results = json.loads(capsys.readouterr().out)["runs"][0]["results"]
    scaler = next(
        r for r in results if r["locations"][0]["physicalLocation"]["region"]["startLine"] == 7
    )
    (fix,) = scaler["fixes"]
    (change,) = fix["artifactChanges"]
    (replacement,) = change["replacements"]
    assert change["artifactLocation"]["uri"] == script.as_uri()
    assert replacement == {
        "deletedRegion": {"startLine": 7, "startColumn": 10, "endLine": 7, "endColumn": 37},
        "insertedContent": {"text": 'torch.amp.GradScaler("cuda")'},
    }
    assert scaler["properties"]["fixApplicability"] == "safe"


def test_fix_keeps_encoding_bom_line_endings_and_permissions(tmp_path: Path, capsys) -> None:
    latin = tmp_path / "latin.py"
    text = "# -*- coding: latin-1 -*-\r\nimport torch\r\nname = 'café'\r\n"
    text += "s = torch.cuda.amp.GradScaler()\r\n"
    latin.write_bytes(text.encode("latin-1"))
    latin.chmod(0o750)
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfimport torch\ns = torch.cuda.amp.GradScaler()\n")
    assert run(parse(str(tmp_path), "--fix", "--format", "concise")) == 0
    fixed = text.replace("torch.cuda.amp.GradScaler()", 'torch.amp.GradScaler("cuda")')
    assert latin.read_bytes() == fixed.encode("latin-1")
    assert latin.stat().st_mode & 0o777 == 0o750
    assert bom.read_bytes() == b'\xef\xbb\xbfimport torch\ns = torch.amp.GradScaler("cuda")\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bom.py", "latin.py"]  # no temporaries


def test_fix_through_a_symbolic_link_keeps_the_link(tmp_path: Path, capsys) -> None:
    real = tmp_path / "real.py"
    real.write_text(SCRIPT, encoding="utf-8")
    link = tmp_path / "link.py"
    link.symlink_to(real)
    assert run(parse(str(link), "--fix", "--format", "concise")) == 1
    assert link.is_symlink() and real.read_text(encoding="utf-8") == SAFE_FIXED


def test_a_file_that_cannot_be_written_is_named_and_the_others_are_fixed(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    from dpwise.infra import atomic

    full, fine = tmp_path / "a_full.py", tmp_path / "b_fine.py"
    for path in (full, fine):
        path.write_text(SCRIPT, encoding="utf-8")
    real_replace = os.replace

    def replace(src, dst):
        if str(dst).endswith("a_full.py"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    monkeypatch.setattr(atomic.os, "replace", replace)
    assert run(parse(str(tmp_path), "--fix", "--format", "concise")) == 2
    err = capsys.readouterr().err
    assert "no space left on device while writing" in err and "a_full.py" in err
    assert full.read_text(encoding="utf-8") == SCRIPT
    assert fine.read_text(encoding="utf-8") == SAFE_FIXED
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_full.py", "b_fine.py"]


def test_fix_leaves_a_syntax_error_alone_and_reports_it(tmp_path: Path, capsys) -> None:
    path = tmp_path / "broken.py"
    path.write_text("import torch\nfor x in y\n    pass\n", encoding="utf-8")
    assert run(parse(str(path), "--fix", "--format", "concise")) == 1
    assert path.read_text(encoding="utf-8") == "import torch\nfor x in y\n    pass\n"
    assert "DPW000 [syntax-error]" in capsys.readouterr().out


def test_list_rules_marks_the_fixable_rules(capsys) -> None:
    assert run(parse("--list-rules")) == 0
    lines = {line.split()[1]: line for line in capsys.readouterr().out.splitlines()}
    assert "  fix  " in lines["shuffle-with-sampler"]
    assert "  fix  " not in lines["data-parallel-usage"]
