"""The analysis's bounds are said, never silent: the time a file may take, and how deep a set-up
helper is followed (analysis-incomplete, DPW022)."""

from __future__ import annotations

from pathlib import Path

from dpwise.lint import checker, lint_paths
from dpwise.lint.analysis import project
from dpwise.lint.rules import CHECKS, analysis_incomplete

CHAIN = Path(__file__).parent / "lint_cases" / "rules" / "analysis-incomplete"
SCRIPT = "import torch.distributed as dist\ndist.init_process_group('gloo')\n"


def test_the_docs_name_the_depth_the_analysis_uses():
    assert analysis_incomplete.CALL_DEPTH_SHOWN == project.CALL_DEPTH


def test_a_file_that_takes_its_whole_budget_says_how_many_rules_ran(monkeypatch):
    monkeypatch.setattr(checker, "FILE_BUDGET_S", 0.0)
    found = checker.lint_source(SCRIPT, "slow.py")
    assert [f.name for f in found] == ["analysis-incomplete"]
    assert f"0 of {len(CHECKS)} rules ran within the 0 s a file may take" in found[0].message


def test_within_the_budget_every_rule_runs():
    found = checker.lint_source(SCRIPT, "train.py")
    assert "analysis-incomplete" not in {f.name for f in found}
    assert "missing-destroy-process-group" in {f.name for f in found}


def test_a_deep_helper_is_followed_up_to_the_bound_and_said_beyond_it():
    deep = lint_paths([str(CHAIN / "bad_helper_deeper_than_the_bound.py")])
    assert [(f.name, f.severity) for f in deep] == [("analysis-incomplete", "info")]
    shallow = lint_paths([str(CHAIN / "good_helper_within_the_bound.py")])
    assert shallow == []


def test_every_rule_says_what_the_analysis_follows_and_where_it_stops():
    from dpwise.lint import RULES, reach
    from dpwise.lint.session import explain

    assert set(reach.PER_RULE) == {r.name for r in RULES}
    for rule in RULES:
        text = explain(rule.name)
        assert reach.HEADING in text and reach.PER_RULE[rule.name] in text
