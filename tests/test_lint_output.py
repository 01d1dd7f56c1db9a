"""`dpwise lint` output formats, noqa, --select/--ignore, exit codes and errors."""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

import pytest

from dpwise.commands.lint import add_arguments, run
from dpwise.errors import DpwiseError
from dpwise.lint import RULES, lint_paths, lint_source
from dpwise.lint.diagnostics import render_concise, render_full, sarif_log

BAD = """\
import os
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

os.environ["MASTER_PORT"] = "29500"
dist.init_process_group("gloo")
model = DDP(build())
"""
# line 5: DPW008 hardcoded-master-port; line 6: DPW011 missing-destroy-process-group


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="dpwise lint")
    add_arguments(parser)
    return parser.parse_args(list(argv))


@pytest.fixture
def bad_file(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text(BAD, encoding="utf-8")
    return path


def test_concise_lines_and_footer(bad_file: Path, capsys) -> None:
    assert run(parse(str(bad_file), "--format", "concise")) == 1
    out = capsys.readouterr().out.splitlines()
    assert out == [
        f"{bad_file}:5:1: DPW008 [hardcoded-master-port] `MASTER_PORT` is set to a literal: "
        "the next job on this node collides with it",
        f"{bad_file}:6:1: DPW011 [missing-destroy-process-group] `init_process_group` is called "
        "but `destroy_process_group` never is",
        "Found 2 issues.",
        "No fixes available (2 hidden fixes can be enabled with the `--unsafe-fixes` option).",
    ]


def test_full_shows_source_caret_and_help(bad_file: Path, capsys) -> None:
    assert run(parse(str(bad_file))) == 1  # full is the default, as in Ruff
    out = capsys.readouterr().out
    block = out.split("\n\n")[0].splitlines()
    assert block[0].startswith(f"{bad_file}:5:1: DPW008 [hardcoded-master-port] ")
    assert block[1:4] == [
        "  |",
        '5 | os.environ["MASTER_PORT"] = "29500"',
        "  | " + "^" * len('os.environ["MASTER_PORT"] = "29500"') + " DPW008",
    ]
    assert block[-2].startswith("  = help: pick a free port")
    assert block[-1] == (
        "  = fix (unsafe): Use `os.environ.setdefault` (the environment can override it)"
    )
    assert "\nFound 2 issues.\nNo fixes available (2 hidden fixes" in out


def test_clean_run_exits_0_with_ruffs_message(tmp_path: Path, capsys) -> None:
    (tmp_path / "ok.py").write_text("import torch\nprint(torch.ones(1))\n", encoding="utf-8")
    assert run(parse(str(tmp_path), "--format", "concise")) == 0
    assert capsys.readouterr().out == "All checks passed!\n"


def test_one_issue_is_singular() -> None:
    finding = lint_source('import os\nos.environ["MASTER_PORT"] = "1"\n')
    assert render_concise(finding).endswith("Found 1 issue.\n")
    assert render_full(finding).endswith("Found 1 issue.\n")


def test_json_shape(bad_file: Path, capsys) -> None:
    assert run(parse(str(bad_file), "--format", "json")) == 1
    data = json.loads(capsys.readouterr().out)
    assert [(d["code"], d["name"], d["line"], d["col"]) for d in data] == [
        ("DPW008", "hardcoded-master-port", 5, 1),
        ("DPW011", "missing-destroy-process-group", 6, 1),
    ]
    required = {"code", "name", "severity", "path", "line", "col", "message", "help"}
    assert all(required <= d.keys() for d in data)
    assert data[0]["severity"] == "warning" and data[0]["path"] == str(bad_file)


def test_json_clean_is_an_empty_list(tmp_path: Path, capsys) -> None:
    (tmp_path / "ok.py").write_text("x = 1\n", encoding="utf-8")
    assert run(parse(str(tmp_path), "--format", "json")) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_sarif_structure(bad_file: Path, capsys) -> None:
    assert run(parse(str(bad_file), "--format", "sarif")) == 1
    log = json.loads(capsys.readouterr().out)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    driver = log["runs"][0]["tool"]["driver"]
    assert driver["name"] == "dpwise"
    rule_ids = [r["id"] for r in driver["rules"]]
    for rule in driver["rules"]:
        assert {"id", "name", "shortDescription", "fullDescription", "help"} <= rule.keys()
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
    results = log["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["DPW008", "DPW011"]
    for result in results:
        assert result["ruleId"] in rule_ids
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]
        assert result["level"] == "warning" and result["message"]["text"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"].endswith("train.py")
        assert location["region"]["startLine"] in (5, 6)
        assert location["region"]["startColumn"] == 1


def test_sarif_maps_info_to_note() -> None:
    source = textwrap.dedent(
        """\
        import torch.distributed as dist
        from torch import nn
        from torch.nn.parallel import DistributedDataParallel as DDP
        dist.init_process_group("gloo")
        model = DDP(nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2)))
        dist.destroy_process_group()
        """
    )
    findings = lint_source(source)
    assert [(f.name, f.severity) for f in findings] == [("batchnorm-without-sync", "info")]
    result = sarif_log(findings, RULES, "0")["runs"][0]["results"][0]
    assert result["level"] == "note"
    assert not findings[0].at_least("warning")


# -- noqa -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("comment", "left"),
    [
        ("# dpwise: noqa", set()),
        ("# dpwise: noqa: DPW008", set()),
        ("# dpwise: noqa: hardcoded-master-port", set()),
        ("# dpwise: noqa: DPW001, DPW008", set()),
        ("# dpwise: noqa: DPW001", {"DPW008"}),
        ("# noqa", {"DPW008"}),
    ],
)
def test_noqa(comment: str, left: set[str]) -> None:
    source = f'import os\nos.environ["MASTER_PORT"] = "29500"  {comment}\n'
    assert {f.code for f in lint_source(source)} == left


def test_noqa_only_applies_to_its_own_line() -> None:
    source = 'import os  # dpwise: noqa\nos.environ["MASTER_PORT"] = "29500"\n'
    assert [f.line for f in lint_source(source)] == [2]


# -- select / ignore ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("select", "ignore", "codes"),
    [
        (None, None, ["DPW008", "DPW011"]),
        (["DPW008"], None, ["DPW008"]),
        (["hardcoded-master-port"], None, ["DPW008"]),
        (["dpw011,hardcoded-master-port"], None, ["DPW008", "DPW011"]),
        (None, ["DPW011"], ["DPW008"]),
        (None, ["missing-destroy-process-group"], ["DPW008"]),
        (["ALL"], ["DPW008", "DPW011"], []),
    ],
)
def test_select_and_ignore(bad_file: Path, select, ignore, codes) -> None:
    findings = lint_paths([str(bad_file)], select=select, ignore=ignore)
    assert [f.code for f in findings] == codes


def test_select_via_cli_repeats_and_commas(bad_file: Path, capsys) -> None:
    args = parse(str(bad_file), "--select", "DPW001", "--select", "DPW011", "--format", "json")
    assert run(args) == 1
    assert [d["code"] for d in json.loads(capsys.readouterr().out)] == ["DPW011"]


@pytest.mark.parametrize("option", ["--select", "--ignore"])
def test_unknown_rule_is_a_usage_error(bad_file: Path, option: str) -> None:
    with pytest.raises(DpwiseError, match=r"unknown rule 'no-such-rule'"):
        run(parse(str(bad_file), option, "DPW008,no-such-rule"))


# -- paths, exit codes, errors ------------------------------------------------------------------
def test_missing_path_is_a_one_line_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.py"
    with pytest.raises(DpwiseError) as info:
        run(parse(str(missing)))
    assert "\n" not in str(info.value) and str(missing) in str(info.value)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs file permissions")
def test_unreadable_file_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "secret.py"
    path.write_text("x = 1\n", encoding="utf-8")
    path.chmod(0)
    try:
        with pytest.raises(DpwiseError, match="cannot read"):
            run(parse(str(path)))
    finally:
        path.chmod(0o644)


def test_read_error_is_a_one_line_usage_error(tmp_path: Path, monkeypatch) -> None:
    from dpwise.infra import userfile

    path = tmp_path / "locked.py"
    path.write_text("x = 1\n", encoding="utf-8")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(userfile, "open", refuse, raising=False)
    with pytest.raises(DpwiseError) as info:
        run(parse(str(tmp_path)))
    assert str(info.value) == f"{path}: cannot read (Permission denied)"


def test_no_path_is_a_usage_error() -> None:
    with pytest.raises(DpwiseError, match="at least one PATH"):
        run(parse())


def test_syntax_error_is_a_finding_and_other_files_are_checked(tmp_path: Path) -> None:
    (tmp_path / "a_broken.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    (tmp_path / "b_bad.py").write_text(BAD, encoding="utf-8")
    findings = lint_paths([str(tmp_path)], select=["DPW008"])
    assert [(Path(f.path).name, f.line, f.code, f.name, f.severity) for f in findings] == [
        ("a_broken.py", 1, "DPW000", "syntax-error", "error"),
        ("b_bad.py", 5, "DPW008", "hardcoded-master-port", "warning"),
    ]


def test_undecodable_file_is_a_syntax_error_finding(tmp_path: Path) -> None:
    (tmp_path / "latin.py").write_bytes(b"x = '\xff\xfe'\n")
    assert [f.code for f in lint_paths([str(tmp_path)])] == ["DPW000"]


def test_folders_recurse_and_skip_environments(tmp_path: Path) -> None:
    for folder in ("pkg/sub", ".venv/lib", "node_modules/x", "__pycache__", ".git"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "train.py").write_text(BAD, encoding="utf-8")
    (tmp_path / "pkg" / "notes.txt").write_text(BAD, encoding="utf-8")
    paths = {Path(f.path).relative_to(tmp_path).as_posix() for f in lint_paths([str(tmp_path)])}
    assert paths == {"pkg/sub/train.py"}


def test_explicit_file_is_checked_whatever_its_extension(tmp_path: Path) -> None:
    script = tmp_path / "train"
    script.write_text(BAD, encoding="utf-8")
    assert [f.code for f in lint_paths([str(script)])] == ["DPW008", "DPW011"]


def test_never_imports_the_checked_code(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    (tmp_path / "evil.py").write_text(
        f"import torch\nopen({str(marker)!r}, 'w').write('x')\nraise SystemExit(3)\n",
        encoding="utf-8",
    )
    lint_paths([str(tmp_path)])
    assert not marker.exists()


# -- explain / list ---------------------------------------------------------------------------
def test_explain_prints_the_four_headings(capsys) -> None:
    assert run(parse("--explain", "missing-set-epoch")) == 0
    out = capsys.readouterr().out
    assert out.startswith("# missing-set-epoch (DPW005)")
    for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
        assert heading in out


def test_explain_by_code_and_unknown(capsys) -> None:
    assert run(parse("--explain", "dpw001")) == 0
    assert "# data-parallel-usage (DPW001)" in capsys.readouterr().out
    with pytest.raises(DpwiseError, match="unknown rule"):
        run(parse("--explain", "nope"))


def test_list_rules(capsys) -> None:
    assert run(parse("--list-rules")) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(RULES)
    assert lines[15].split()[:3] == ["DPW015", "batchnorm-without-sync", "info"]


def test_every_rule_is_documented_and_named_in_kebab_case() -> None:
    codes = [r.code for r in RULES]
    assert codes == [f"DPW{i:03d}" for i in range(len(RULES))]
    for rule in RULES:
        assert rule.name == rule.name.lower() and " " not in rule.name and "_" not in rule.name
        for heading in ("## What it does", "## Why is this bad?", "## Example", "## Use instead"):
            assert heading in rule.docs, (rule.name, heading)
        assert rule.help and rule.message and rule.summary
    docs = " ".join(r.docs + r.message + r.help for r in RULES if r.name == "data-parallel-usage")
    assert "is deprecated" not in docs.replace("not deprecated", "")


def test_lint_paths_is_pure(bad_file: Path, capsys) -> None:
    lint_paths([str(bad_file)])
    assert capsys.readouterr() == ("", "")


# -- through the real CLI, once `dpwise lint` is wired into dpwise.cli ---------------------------
def _cli_has_lint() -> bool:
    from dpwise.cli import build_parser

    try:
        build_parser().parse_args(["lint", "--list-rules"])
    except Exception:
        return False
    return True


needs_cli = pytest.mark.skipif(not _cli_has_lint(), reason="`dpwise lint` is not wired yet")


@needs_cli
def test_cli_exit_codes(bad_file: Path, tmp_path: Path, capsys) -> None:
    from dpwise.cli import main

    clean = tmp_path / "ok.py"
    clean.write_text("x = 1\n", encoding="utf-8")
    assert main(["lint", str(clean)]) == 0
    assert main(["lint", str(bad_file)]) == 1
    capsys.readouterr()
    assert main(["lint", str(tmp_path / "missing.py")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpwise: error: ") and err.count("\n") == 1
    assert main(["lint", str(bad_file), "--select", "nope"]) == 2
