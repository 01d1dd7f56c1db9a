"""Bad input: one line on stderr, exit code 2, no traceback, nothing written."""

import pytest
import torch

from conftest import run_cli
from dpwise.cli import main


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--strategy", "ddp", "--batch-size", "255"], "use a multiple of 2 (e.g. 254 or 256)"),
        (["--strategy", "ddp", "--backend", "nccl"], "--backend nccl needs CUDA GPUs"),
        (["--strategy", "ddp", "--nproc", "0"], "--nproc must be at least 1, got 0"),
        (["--device", "cuda"], "--device cuda needs a CUDA GPU"),
        (["--strategy", "zero"], "argument --strategy: invalid choice: 'zero'"),
        (["--precision", "fp8"], "argument --precision: invalid choice: 'fp8'"),
        (["--model", "nosuch.mod:build", "--data", "x:y"], "cannot import nosuch.mod"),
        (
            ["--model", "userpkg:not_a_module", "--data", "userpkg:tiny_data", "--batch-size", "8"],
            "expected a torch.nn",
        ),
        (["--model", "userpkg:tiny_model", "--data", "userpkg:failing_data"], "no data here"),
        (["--model-arg", "layers"], "--model-arg 'layers' is not KEY=VALUE"),
        (["--batch-size", "20000"], "fewer than one optimizer step needs"),
        (["--resume"], "checkpoint.pt: no such checkpoint file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args, expected, capsys, userpkg, tmp_path):
    out = tmp_path / "out"
    if torch.cuda.is_available() and "cuda" in " ".join(args):
        pytest.skip("this machine has CUDA")
    code = main(["train", "--quiet", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert "Traceback" not in err
    assert not out.exists()


def test_unwritable_output_folder(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code = main(["train", "--quiet", "--out", str(blocker / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "is not a folder" in err and len(err.strip().splitlines()) == 1
    code = main(["train", "--quiet", "--out", "/proc/dpwise-run"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot write in /proc" in err


def test_resume_without_path_or_out(capsys):
    assert main(["train", "--resume"]) == 2
    assert "--resume without a PATH needs --out DIR" in capsys.readouterr().err


def test_the_console_entry_point_reports_errors_the_same_way():
    proc = run_cli("train", "--strategy", "ddp", "--batch-size", "7")
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        "dpwise: error: --batch-size 7 is not divisible by world size 2; "
        "use a multiple of 2 (e.g. 6 or 8)"
    ]


def test_help_teaches():
    proc = run_cli("train", "--help")
    assert proc.returncode == 0
    for text in ("GLOBAL batch", "torchrun --standalone", "--checkpoint-every", "--model-arg"):
        assert text in proc.stdout
