"""`dpwise lint --fix`: every fixable rule against its fix cases, and the fix machinery.

Fix cases live in tests/lint_cases/fixes/<rule-name>/<case>.py, each with the exact text the fix
must produce beside it (<case>.py.expected, read and approved by a person); `nofix_` cases must
stay as they are. Each case has comments inside and around the edits, so the snapshot also proves
that comments and layout outside an edit are kept byte for byte (a comment on a line that a fix
deletes goes with it; the cases mark such a comment "goes with the argument").
"""

from __future__ import annotations

import ast
import io
import tokenize
from pathlib import Path

import pytest

from dpwise.lint import lint_source
from dpwise.lint.fix import edits
from dpwise.lint.fixer import fix_source
from dpwise.lint.model import SAFE, Edit, Fix
from dpwise.lint.rules import FIXERS, RULES, find_rule, selected

CASES = Path(__file__).parent / "lint_cases"
FIX_CASES = sorted((CASES / "fixes").rglob("*.py"))
SAFE_RULES = {"deprecated-amp-api", "shuffle-with-sampler"}


def rule_of(path: Path):
    rule = find_rule(path.parent.name)
    assert rule is not None, path
    return rule


def fixed(path: Path, unsafe: bool = True):
    return fix_source(path.read_text(encoding="utf-8"), str(path), [rule_of(path)], unsafe=unsafe)


def comments(source: str) -> list[str]:
    tokens = tokenize.generate_tokens(io.StringIO(source).readline)
    return [t.string for t in tokens if t.type == tokenize.COMMENT]


def test_every_fixable_rule_has_fix_cases_and_the_candidates_are_fixable() -> None:
    fixable = {r.name for r in RULES if r.code in FIXERS}
    assert fixable == {p.parent.name for p in FIX_CASES}
    assert fixable >= {
        "deprecated-amp-api",
        "shuffle-with-sampler",
        "wrapped-state-dict",
        "missing-set-epoch",
        "hardcoded-master-port",
        "missing-destroy-process-group",
        "reentrant-checkpoint-with-ddp",
    }
    for name in fixable:  # every fixable rule has a case its fix settles
        assert any(not p.name.startswith("nofix_") for p in FIX_CASES if p.parent.name == name)


@pytest.mark.parametrize("path", FIX_CASES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_fix_gives_the_approved_text(path: Path) -> None:
    expected = Path(f"{path}.expected").read_text(encoding="utf-8")
    result = fixed(path)
    assert result.after == expected
    if path.name.startswith("nofix_"):
        assert not result.changed and any(f.fix is None for f in result.remaining)
    else:
        assert result.changed


@pytest.mark.parametrize(
    "path",
    [p for p in FIX_CASES if not p.name.startswith("nofix_")],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_fixed_file_parses_loses_the_finding_keeps_comments_and_is_stable(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    rule = rule_of(path)
    before = [f for f in lint_source(source, str(path), [rule]) if f.code == rule.code]
    result = fixed(path)
    ast.parse(result.after)
    assert before and len(result.fixed) == len(before)
    assert [f for f in result.remaining if f.code == rule.code] == []
    # Every comment is kept, except one on a line the fix deletes (marked so in the case).
    kept = [c for c in comments(source) if "goes with the argument" not in c]
    assert comments(result.after) == kept
    again = fix_source(result.after, str(path), [rule], unsafe=True)
    assert not again.changed and again.fixed == []


@pytest.mark.parametrize(
    "path",
    [p for p in FIX_CASES if not p.name.startswith("nofix_")],
    ids=lambda p: f"{p.parent.name}/{p.name}",
)
def test_unsafe_fixes_wait_for_unsafe_fixes(path: Path) -> None:
    safe_only = fixed(path, unsafe=False)
    assert all(f.fix is not None and f.fix.applicability == SAFE for f in safe_only.fixed)
    if path.parent.name in SAFE_RULES and path.name != "custom_function.py":
        assert safe_only.after == fixed(path).after
    else:
        assert not safe_only.changed


def test_fixing_every_fixture_keeps_it_parsable_and_a_second_pass_changes_nothing() -> None:
    rules = selected(None, None)
    sources = sorted(p for p in CASES.rglob("*.py") if "fixes" not in p.parts)
    changed = 0
    for path in sources:
        source = path.read_text(encoding="utf-8")
        result = fix_source(source, str(path), rules, unsafe=True)
        assert not result.broken, path
        if not result.changed:
            continue  # a syntax-error or too-deep fixture stays as it is
        ast.parse(result.after)
        assert not fix_source(result.after, str(path), rules, unsafe=True).changed, path
        changed += result.changed
    assert changed >= 12  # most bad_ fixtures of the fixable rules


# -- the cases' code runs as it should ----------------------------------------------------------
def test_fixed_amp_code_runs_without_the_deprecation_warning() -> None:
    source = (
        "import torch\n"
        "model = torch.nn.Linear(2, 2)\n"
        "with torch.cpu.amp.autocast(True, torch.bfloat16):\n"
        "    out = model(torch.ones(1, 2))\n"
        "scaler = torch.cpu.amp.GradScaler(2.0**4)\n"
    )
    result = fix_source(source, "amp.py", selected(["deprecated-amp-api"], None))
    assert 'torch.amp.autocast("cpu", enabled=True, dtype=torch.bfloat16)' in result.after
    with pytest.warns(FutureWarning):
        exec(compile(source, "before.py", "exec"), {})
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        scope: dict = {}
        exec(compile(result.after, "after.py", "exec"), scope)
    assert scope["out"].dtype.is_floating_point and scope["scaler"].get_scale() == 16.0


def test_fixed_data_loader_no_longer_raises() -> None:
    path = CASES / "fixes" / "shuffle-with-sampler" / "keyword_and_position.py"
    source = path.read_text(encoding="utf-8")
    with pytest.raises(ValueError, match="mutually exclusive"):
        exec(compile(source, str(path), "exec"), {})
    scope: dict = {}
    exec(compile(fixed(path).after, str(path), "exec"), scope)
    assert len(list(scope["loader"])) == 2  # 16 samples / 2 replicas / batch 4


def test_fixed_set_epoch_changes_the_order_between_epochs() -> None:
    source = (
        "import torch\n"
        "from torch.utils.data import DataLoader, DistributedSampler\n"
        "orders = []\n"
        "def train(data, epochs):\n"
        "    sampler = DistributedSampler(data, num_replicas=1, rank=0)\n"
        "    loader = DataLoader(data, batch_size=16, sampler=sampler)\n"
        "    for epoch in range(epochs):\n"
        "        for batch in loader:\n"
        "            orders.append(batch.tolist())\n"
        "train(torch.arange(16), 2)\n"
    )
    rules = selected(["missing-set-epoch"], None)
    result = fix_source(source, "epochs.py", rules, unsafe=True)
    assert "        sampler.set_epoch(epoch)\n        for batch in loader:" in result.after
    for text, same in ((source, True), (result.after, False)):
        scope: dict = {}
        exec(compile(text, "epochs.py", "exec"), scope)
        first, second = scope["orders"]
        assert (first == second) is same


# -- the machinery ------------------------------------------------------------------------------
def test_edits_keep_crlf_line_endings_and_count_columns_in_characters() -> None:
    source = 'import torch\r\nx = "é"; s = torch.cuda.amp.GradScaler()  # note\r\n'
    result = fix_source(source, "crlf.py", selected(["deprecated-amp-api"], None))
    assert result.after == ('import torch\r\nx = "é"; s = torch.amp.GradScaler("cuda")  # note\r\n')
    (finding,) = lint_source(source, "crlf.py", fixes=True)
    (edit,) = finding.fix.edits
    assert (edit.line, edit.col) == (2, 14)  # characters, not UTF-8 bytes (é is two)


def test_overlapping_fixes_wait_for_the_next_round_and_identical_ones_count_once() -> None:
    one = Fix(SAFE, "a", (Edit(1, 1, 1, 4, "AAA"),))
    two = Fix(SAFE, "b", (Edit(1, 3, 1, 6, "BBB"),))
    out, applied = edits.apply("abcdefgh", [two, one, one])
    assert (out, applied) == ("AAAdefgh", [one])
    bad = Fix(SAFE, "c", (Edit(1, 1, 1, 3, "x"), Edit(1, 2, 1, 4, "y")))
    assert edits.apply("abcdefgh", [bad]) == ("abcdefgh", [])


def test_a_fix_that_breaks_the_code_is_never_kept(monkeypatch) -> None:
    from dpwise.lint import rules
    from dpwise.lint.rules import shuffle_with_sampler as rule

    def broken(ctx, hit):
        return Fix(SAFE, "oops", (ctx.text.replace(hit.node, "shuffle=("),))

    monkeypatch.setitem(rules.FIXERS, rule.RULE.code, broken)
    source = (CASES / "fixes" / "shuffle-with-sampler" / "keyword_and_position.py").read_text()
    result = fix_source(source, "x.py", [rule.RULE])
    assert result.broken and result.after == source and result.remaining


def test_a_fixer_that_raises_offers_no_fix_and_keeps_the_finding(monkeypatch) -> None:
    from dpwise.lint import rules
    from dpwise.lint.rules import shuffle_with_sampler as rule

    def crashes(ctx, hit):
        raise KeyError("bug")

    monkeypatch.setitem(rules.FIXERS, rule.RULE.code, crashes)
    source = (CASES / "fixes" / "shuffle-with-sampler" / "keyword_and_position.py").read_text()
    findings = lint_source(source, "x.py", [rule.RULE], fixes=True)
    assert len(findings) == 3 and all(f.fix is None for f in findings)
