"""The migration's case scripts: each ok/ script trains and writes its weights; each refuse/ script
says why it is refused."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

from helpers_alone import run_alone

CASES = Path(__file__).parent / "migrate_cases"
OK = sorted((CASES / "ok").glob("*.py"))
REFUSE = sorted((CASES / "refuse").glob("*.py"))
REFUSE_REASONS = {
    "custom-sampler",
    "iterable-dataset",
    "model-parallel",
    "own-spawning",
    "already-distributed",
}


def assert_weights(path: Path) -> None:
    state = torch.load(path, weights_only=True)
    assert state, f"{path} holds no tensors"
    assert all(isinstance(v, torch.Tensor) for v in state.values())
    wrapped = [k for k in state if k.startswith("module.")]
    assert not wrapped, f"weights saved with the wrapper's prefix: {wrapped}"


def test_the_cases_cover_the_styles_the_issue_names():
    names = {p.stem for p in OK}
    styles = {"argparse_script", "config_file", "train_function", "class_trainer"}
    styles |= {"amp_gradscaler", "grad_accumulation", "checkpoint_resume", "tqdm_progress"}
    assert styles <= names
    assert len(REFUSE) >= 3


@pytest.mark.slow
def test_tqdm_case_runs_without_tqdm(tmp_path: Path):
    """Run alone (helpers_alone) with its import of tqdm failing, as where tqdm is missing."""
    script = tmp_path / "tqdm_progress.py"
    script.write_text((CASES / "ok" / "tqdm_progress.py").read_text())
    err = tmp_path / "stderr"
    assert run_alone(script, blocked=("tqdm",), stderr=err) == 0, err.read_text()[-2000:]
    assert "it/s" not in err.read_text(), "a tqdm bar was drawn: the import was not blocked"
    assert_weights(tmp_path / "weights.pt")


@pytest.mark.parametrize("script", REFUSE, ids=[p.stem for p in REFUSE])
def test_refuse_case_names_its_reason(script: Path):
    text = script.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# refuse: "), f"{script.name} starts with {first!r}"
    assert first.removeprefix("# refuse: ").strip() in REFUSE_REASONS
    ast.parse(text)


def test_every_ok_case_migrates_and_lints_clean(tmp_path: Path):
    from dpwise.lint import lint_paths
    from dpwise.migrate import migrate_source

    dirty = {}
    for script in OK:
        out = tmp_path / script.name
        out.write_text(migrate_source(script.read_text()).code)
        found = [f"{f.line}: {f.name}" for f in lint_paths([str(out)]) if f.at_least("warning")]
        if found:
            dirty[script.name] = found
    assert not dirty, dirty


@pytest.mark.parametrize("script", REFUSE, ids=[p.stem for p in REFUSE])
def test_refuse_case_is_refused_with_its_reason(script: Path):
    """(The command line's exit 2 and nothing written: test_migrate.py.)"""
    from dpwise.migrate import MigrationRefused, migrate_source

    with pytest.raises(MigrationRefused) as refused:
        migrate_source(script.read_text())
    assert refused.value.reasons


def verified(script: Path, folder: Path) -> str | None:
    """None when the migrated `script` verifies as the same model; else why. The migrated copy
    is left in ``folder`` to run alone. The original trains on one process: each of its
    processes trains alone, on the same rows (`dpwise migrate --verify` itself runs two)."""
    from dpwise.migrate import migrate_source
    from dpwise.migrate.verify import verify

    code = migrate_source(script.read_text()).code
    verdict = verify(script, code, steps=4, original_nproc=1)
    if not verdict.same or verdict.moved <= 1e-4:
        return f"verify: {verdict}"
    folder.mkdir()
    for sibling in script.parent.glob("*.json"):  # a config file read from beside the script
        (folder / sibling.name).write_text(sibling.read_text())
    (folder / script.name).write_text(code)
    return None


@pytest.mark.slow
@pytest.mark.parametrize("script", OK, ids=[p.stem for p in OK])
def test_ok_case_verifies_as_the_same_model_and_still_runs_alone(tmp_path: Path, script: Path):
    why = verified(script, tmp_path / script.stem)
    assert why is None, why
    migrated = tmp_path / script.stem / script.name
    assert run_alone(migrated) == 0
    assert_weights(migrated.with_name("weights.pt"))
