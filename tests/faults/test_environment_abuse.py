"""Settings and environments that used to slip through: a broken OMP_NUM_THREADS, a seed torch
cannot take, a script that ends early under --verify (its own words, not torch's banner)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import child_env
from dpwise.cli import main
from dpwise.userscript import run
from dpwise.userscript.harness import ENDED, LOG


def _one_line(capsys) -> str:  # type: ignore[no-untyped-def]
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("value", ["0", "-2", "four", "4,0", ""])
def test_an_omp_num_threads_that_is_no_count_is_refused(value, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("OMP_NUM_THREADS", value)
    assert main(["train", "--max-steps", "1", "--out", str(tmp_path / "o")]) == 2
    assert f"OMP_NUM_THREADS={value!r} is not a thread count" in _one_line(capsys)
    assert not (tmp_path / "o").exists()


def test_commands_that_run_no_model_ignore_omp_num_threads(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OMP_NUM_THREADS", "0")
    script = tmp_path / "ok.py"
    script.write_text("x = 1\n")
    assert main(["lint", str(script)]) == 0


@pytest.mark.parametrize("seed", ["-1", str(2**63), "99999999999999999999999"])
def test_a_seed_torch_cannot_take_is_one_line(seed, capsys):
    assert main(["train", "--seed", seed, "--max-steps", "1"]) == 2
    assert "--seed must be between 0 and 9223372036854775807" in _one_line(capsys)


EARLY = """
import sys
import torch
model = torch.nn.Linear(4, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    model(torch.randn(8, 4)).sum().backward()
    opt.step()
print("data file missing: /data/imagenet", file=sys.stderr)
sys.exit(3)
"""


def test_a_script_that_exits_early_under_verify_is_named_with_its_code_and_last_line(tmp_path):
    """The harness, as a launched worker runs it (its output in its log), then verify's words."""
    script = tmp_path / "train.py"
    script.write_text(EARLY)
    folder = tmp_path / "original"
    folder.mkdir()
    env = {"DPWISE_SCRIPT_STEPS": "4", "DPWISE_SCRIPT_OUT": str(folder / "verify-params.pt")}
    with open(folder / f"{LOG}0.log", "w") as log:
        proc = subprocess.run(
            [sys.executable, "-m", "dpwise.userscript.harness", str(script)],
            stdout=log,
            stderr=log,
            env=child_env(env),
            timeout=120,
        )
    assert proc.returncode == 3
    assert (folder / f"{ENDED}0").read_text() == "it exited with code 3 after 2 of 4 steps"
    assert run.why_ended(folder, 4, 600, None) == (
        "did not reach 4 steps under torchrun: it exited with code 3 after 2 of 4 steps (its "
        "last line: data file missing: /data/imagenet)"
    )


def test_torchs_error_banner_is_never_the_cause_shown():
    banner = "\n".join(["*" * 40, "worker failed", "=" * 40, "*" * 40])
    assert (
        run.cause(banner, 4) == "failed under torchrun (worker failed); run it by hand to see why"
    )


def test_a_temporary_folder_too_deep_for_a_unix_socket_still_launches(tmp_path):
    """A deep TMPDIR (a job's scratch folder) leaves no room for the fork server's socket path
    (107 bytes): it goes to a short system folder instead of `OSError: AF_UNIX path too long`."""
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    proc = subprocess.run(
        [sys.executable, "-m", "dpwise", "train", "--strategy", "ddp", "--nproc", "2",
         "--model", "userpkg:tiny_model", "--data", "userpkg:tiny_data", "--batch-size", "8",
         "--max-steps", "2", "--quiet"],
        capture_output=True, text=True, env=child_env({"TMPDIR": str(deep)}), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in deep.iterdir() if not p.name.startswith("torchinductor_")] == []
