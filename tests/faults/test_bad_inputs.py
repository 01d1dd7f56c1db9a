"""A model and data that do not fit each other: one line and exit code 2 before training, never a
traceback. Each case runs through the command line (`dpwise train`, one through `compare`)."""

from __future__ import annotations

import pytest

from conftest import run_cli
from dpwise.cli import main
from dpwise.workload.data import epoch_permutation

TRAIN = ("train", "--quiet", "--epochs", "1", "--max-steps", "3", "--batch-size", "16")
MODEL = ("--model", "misfits:model")

CASES = {
    "labels_too_high": "labels reach 9 but the model outputs 3 classes; labels must lie in 0…2",
    "labels_negative": "labels include -1, but class labels must lie in 0…2",
    "labels_float": "--loss auto chose mse for float targets (float32 (16))",
    "labels_2d": "--loss auto chose token-cross-entropy for 2-D targets (int64 (16, 2))",
    "wrong_features": "have 7 features per sample but its first layer (0: Linear) takes 4",
    "float64_inputs": "the inputs are float64 but the model's weights are float32",
    "triples": "the Dataset's items are list; each item must be an (inputs, target) pair",
    "scalars": "each sample is a single number: the data's items are plain numbers",
}


def _error(capsys, *args: str) -> str:
    assert main([*TRAIN, *args]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("dpwise: error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("data", list(CASES))
def test_data_that_does_not_fit_the_model_is_one_line(data, userpkg, capsys, tmp_path):
    out = tmp_path / "run"
    line = _error(capsys, *MODEL, "--data", f"misfits:{data}", "--out", str(out))
    assert CASES[data] in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ("labels_float", "cross-entropy needs integer class labels, got float32 targets"),
        ("labels_2d", "cross-entropy needs logits (batch, classes) and labels (batch,)"),
        ("labels_too_high", "labels reach 9 but the model outputs 3 classes"),
    ],
)
def test_an_explicit_cross_entropy_says_what_it_needs(data, expected, userpkg, capsys):
    assert expected in _error(
        capsys, *MODEL, "--data", f"misfits:{data}", "--loss", "cross-entropy"
    )


def test_a_bad_label_outside_the_first_batch_of_a_dataset_is_one_line(userpkg, capsys):
    """A Dataset's labels are only seen batch by batch: the late one is caught at its step."""
    first_batch = set(epoch_permutation(64, 0, 0)[:16].tolist())
    late = next(i for i in range(64) if i not in first_batch)
    data = ("--data", "misfits:late_bad_label", "--data-arg", f"bad_index={late}")
    line = _error(capsys, *MODEL, *data, "--max-steps", "4")
    assert "labels reach 7 but the model outputs 3 classes" in line


def test_int32_labels_train(userpkg, capsys, tmp_path):
    assert main([*TRAIN, *MODEL, "--data", "misfits:int32_labels", "--out", str(tmp_path)]) == 0
    assert (tmp_path / "final.pt").exists()


@pytest.mark.parametrize(
    ("arg", "expected"),
    [
        ("layers=-1", "--model-arg layers=-1: layers must be a whole number of at least 1"),
        ("dim=0", "--model-arg dim=0: dim must be a whole number of at least 1"),
        ("heads=3", "--model-arg heads=3 must divide dim=64"),
        ("dropout=1.5", "--model-arg dropout=1.5 must lie in [0, 1)"),
    ],
)
def test_a_bad_size_of_a_built_in_model_is_one_line(arg, expected, capsys):
    assert expected in _error(capsys, "--model", "transformer", "--model-arg", arg)


def test_the_command_line_prints_one_line_and_exits_2(tmp_path):
    out = tmp_path / "run"
    proc = run_cli(*TRAIN, *MODEL, "--data", "misfits:labels_too_high", "--out", str(out))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "dpwise: error: --model misfits:model: labels reach 9 but the model outputs 3 classes; "
        "labels must lie in 0…2: give the model more outputs (e.g. --model-arg classes=10) or fix "
        "the labels"
    ]
    assert not out.exists()


def test_compare_stops_on_a_misfit_with_one_line_and_no_report(tmp_path, run_here):
    out = tmp_path / "cmp"
    proc = run_here(
        "compare",
        "--quiet",
        *MODEL,
        *("--data", "misfits:wrong_features", "--strategies", "single", "--batch-size", "16"),
        *("--epochs", "2", "--max-steps", "2", "--repeats", "1", "--out", str(out)),
    )
    assert proc.returncode == 2
    (line,) = proc.stderr.strip().splitlines()
    assert CASES["wrong_features"] in line
    assert not out.exists()
