"""Every lint rule against its fixtures, the guide's three scripts, and a clean corpus.

Fixtures live in tests/lint_cases/rules/<rule-name>/{bad,good}_*.py. A line that must be reported
ends with `# expect: <rule-name>[, <rule-name>...]`; every other line must stay silent (for all
rules, not only the one under test), so a false positive of any rule on any fixture fails a test.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dpwise.lint import RULES, find_rule, lint_paths

CASES = Path(__file__).parent / "lint_cases"
RULE_DIRS = CASES / "rules"
EXPECT = re.compile(r"# expect: (?P<names>[\w\-, ]+)$")
FIXTURES = sorted(p for p in RULE_DIRS.rglob("*.py") if p.name.startswith(("bad_", "good_")))


def expected(path: Path) -> set[tuple[int, str]]:
    marks = set()
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        match = EXPECT.search(line)
        if match:
            marks |= {(number, name.strip()) for name in match.group("names").split(",")}
    return marks


def reported(path: Path) -> set[tuple[int, str]]:
    return {(f.line, f.name) for f in lint_paths([str(path)])}


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fixture_reports_exactly_the_marked_lines(path: Path) -> None:
    assert reported(path) == expected(path)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_has_a_firing_and_a_clean_fixture(rule) -> None:
    folder = RULE_DIRS / rule.name
    bad = sorted(folder.glob("bad_*.py"))
    good = sorted(folder.glob("good_*.py"))
    assert bad and good, f"{folder} needs bad_*.py and good_*.py"
    for path in bad:
        assert any(name == rule.name for _, name in expected(path)), path
    for path in good:
        assert not any(name == rule.name for _, name in expected(path)), path


def test_fixture_findings_carry_the_rules_code_and_severity() -> None:
    findings = lint_paths([str(RULE_DIRS)])
    assert {f.name for f in findings} == {r.name for r in RULES}
    for f in findings:
        rule = find_rule(f.name)
        assert rule is not None and (f.code, f.severity) == (rule.code, rule.severity)


# -- the guide's scripts, verbatim ------------------------------------------------------------
GUIDE = CASES / "guide"


def test_guide_ddp_train_findings() -> None:
    """ddp_train.py: the literal port, and the loader from common.get_dataloader (no sampler).

    Not reported, on purpose: set_device runs in setup() before the model is built; init runs in
    setup() before DDP; cleanup() destroys the group; the per-rank progress print names the rank;
    the script itself never mentions torchrun (only the guide's text does); no sampler, no
    set_epoch; no state dict is saved."""
    findings = lint_paths([str(GUIDE / "ddp_train.py")])
    assert [(f.line, f.col, f.code, f.name) for f in findings] == [
        (11, 5, "DPW008", "hardcoded-master-port"),
        (24, 14, "DPW004", "missing-distributed-sampler"),
    ]
    assert "`get_dataloader`" in findings[1].message
    assert "common.py:18" in findings[1].message


def test_guide_dp_train_findings() -> None:
    findings = lint_paths([str(GUIDE / "dp_train.py")])
    assert [(f.line, f.col, f.code, f.name, f.severity) for f in findings] == [
        (8, 16, "DPW001", "data-parallel-usage", "warning"),
    ]
    message = findings[0].message
    assert "not deprecated" in message and "recommends `DistributedDataParallel`" in message


def test_guide_common_has_no_findings_and_folder_reports_each_once() -> None:
    assert lint_paths([str(GUIDE / "common.py")]) == []
    together = lint_paths([str(GUIDE)])
    assert [(Path(f.path).name, f.line, f.code) for f in together] == [
        ("ddp_train.py", 11, "DPW008"),
        ("ddp_train.py", 24, "DPW004"),
        ("dp_train.py", 8, "DPW001"),
    ]


def test_guide_fixtures_are_verbatim() -> None:
    seed = Path(__file__).resolve().parents[2] / "shared" / "seed" / "scripts"  # beside the repo
    if not seed.is_dir():
        pytest.skip("the guide's scripts are not on this machine")
    for name in ("common.py", "dp_train.py", "ddp_train.py"):
        assert (GUIDE / name).read_bytes() == (seed / name).read_bytes(), name


# -- the clean corpus ---------------------------------------------------------------------------
CLEAN = sorted((CASES / "clean").glob("*.py"))


def test_clean_corpus_is_large_enough() -> None:
    assert len(CLEAN) >= 10


@pytest.mark.parametrize("path", CLEAN, ids=lambda p: p.name)
def test_clean_script_has_nothing_at_warning_or_above(path: Path) -> None:
    loud = [f for f in lint_paths([str(path)]) if f.at_least("warning")]
    assert loud == []


def test_clean_corpus_info_findings_are_only_the_documented_one() -> None:
    findings = lint_paths([str(CASES / "clean")])
    assert [(Path(f.path).name, f.name, f.severity) for f in findings] == [
        ("resnet_bn_info.py", "batchnorm-without-sync", "info"),
    ]


def test_wrapped_state_dict_help_names_the_users_variable() -> None:
    path = RULE_DIRS / "wrapped-state-dict" / "bad_save_on_master.py"
    helps = {f.help for f in lint_paths([str(path)]) if f.name == "wrapped-state-dict"}
    assert helps == {"save `net.module.state_dict()` (the unwrapped model)"}


def test_syntax_error_from_async_as_a_name_says_why() -> None:
    path = RULE_DIRS / "syntax-error" / "bad_python2_async.py"
    [finding] = lint_paths([str(path)])
    assert "`async` is a reserved keyword since Python 3.7" in finding.message
    assert "`non_blocking=True`" in finding.message
    [plain] = lint_paths([str(RULE_DIRS / "syntax-error" / "bad_missing_colon.py")])
    assert "reserved keyword" not in plain.message


def test_the_code_table_names_every_rule_module_once_in_code_order() -> None:
    from dpwise.lint import rules

    codes = [code for code, _ in rules.CODES]
    assert codes == sorted(set(codes)), "codes are unique and in order"
    assert all(code < rules.NEXT_CODE for code in codes)
    assert int(rules.NEXT_CODE[3:]) == int(codes[-1][3:]) + 1, "NEXT_CODE is the next free one"
    folder = Path(rules.__file__).parent
    modules = {p.stem for p in folder.glob("*.py") if p.stem != "__init__"}
    assert {m.__name__.rsplit(".", 1)[1] for _, m in rules.CODES} == modules
    assert [r.code for r in RULES] == codes
