"""Non-finite training: a real NaN (a learning rate of 1e30, NaN or inf inputs) stops `train` at
its step with one line and no final.pt; `compare` names the diverged runs and writes strict JSON;
`advise --from` recommends none of them."""

from __future__ import annotations

import json
import math

import pytest
import torch

from dpwise.cli import main
from dpwise.train import finite, outputs

SMALL = ("--quiet", "--epochs", "1", "--max-steps", "4")
MISFITS = ("--model", "misfits:model", "--batch-size", "16")


def _strict(text: str):
    """json.loads that refuses NaN and Infinity, as every strict JSON reader does."""

    def refuse(name: str):
        raise ValueError(f"bare {name} in JSON")

    return json.loads(text, parse_constant=refuse)


def _one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize("flag", ["--lr", "--momentum", "--weight-decay"])
@pytest.mark.parametrize("value", ["inf", "nan"])
def test_a_non_finite_hyper_parameter_is_refused_at_validation(flag, value, capsys, tmp_path):
    assert main(["train", flag, value, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dpwise: error: {flag} must") and value in err
    assert not (tmp_path / "run").exists()


def test_compare_refuses_an_infinite_learning_rate(capsys, tmp_path):
    assert main(["compare", "--lr", "inf", "--out", str(tmp_path / "c")]) == 2
    assert "--lr must be a finite number, got inf" in capsys.readouterr().err
    assert not (tmp_path / "c").exists()


def test_a_huge_learning_rate_stops_at_the_first_nan_and_writes_no_final_weights(
    tmp_path, run_here
):
    out = tmp_path / "run"
    proc = run_here("train", *SMALL, "--lr", "1e30", "--checkpoint-every", "1", "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc.stderr)
    assert "the loss became nan at step 2 (epoch 1, step 2 of the epoch)" in line
    assert "the last finite loss was 2.3" in line and "(step 1)" in line
    assert "learning rate too high (--lr 1e+30)" in line and "wrote no final.pt" in line
    assert not (out / "final.pt").exists() and not (out / "metrics.json").exists()
    # the checkpoint of step 1 stayed: the NaN step was caught before its checkpoint
    state = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert all(torch.isfinite(t).all() for t in state["model"].values())


@pytest.mark.parametrize(
    ("data", "value", "rows"), [("nan_inputs", "nan", 1), ("inf_inputs", "inf", 7)]
)
def test_non_finite_inputs_are_named_as_the_cause(tmp_path, userpkg, capsys, data, value, rows):
    out = tmp_path / "run"
    code = main(["train", *SMALL, *MISFITS, "--data", f"misfits:{data}", "--out", str(out)])
    assert code == 2
    line = _one_line(capsys.readouterr().err)
    assert "became nan at step 1" in line and "no step had a finite loss" in line
    assert f"non-finite inputs ({rows} of the 16 rows of this step's batch hold {value})" in line
    assert not out.exists()  # nothing was written


def test_ddp_stops_every_worker_when_one_rank_sees_a_nan(tmp_path, run_here):
    """The NaN row lands on one rank: that rank stops at once, the launcher stops the other."""
    out = tmp_path / "run"
    args = ("--strategy", "ddp", "--nproc", "2", "--data", "misfits:nan_inputs")
    proc = run_here("train", *SMALL, *MISFITS, *args, "--out", str(out))
    assert proc.returncode == 2, proc.stderr
    line = _one_line(proc.stderr)
    assert "'s loss became nan at step 1" in line and "rank " in line
    assert "non-finite inputs (1 of the 8 rows" in line
    assert not out.exists()


@pytest.mark.slow
def test_compare_names_the_diverged_runs_and_writes_strict_json(tmp_path, run_here):
    out = tmp_path / "cmp"
    proc = run_here(
        "compare",
        "--quiet",
        *("--strategies", "single,ddp", "--world-sizes", "2"),
        *("--epochs", "2", "--max-steps", "3", "--repeats", "1", "--profile-steps", "1"),
        *("--lr", "1e30", "--out", str(out)),
    )
    assert proc.returncode == 1, proc.stderr  # a check failed
    results = _strict((out / "results.json").read_text())
    check = next(c for c in results["checks"] if c["name"] == "convergence")
    assert check["status"] == "fail"
    assert check["summary"].startswith("single, ddp × 2 diverged: the loss became non-finite")
    assert "likely cause: a learning rate too high (--lr 1e+30)" in check["explanation"]
    runs = {r["id"]: r for r in results["runs"]}
    assert runs["single"]["diverged"]["step"] == 2 and runs["ddp-2"]["diverged"]["step"] == 2
    assert runs["single"]["losses"][1] is None  # a NaN, written as null ...
    assert results["non_finite_values"]["values"]["runs[0].losses[1]"] == "nan"  # ... and why
    assert results["recommendation"]["diverged"] == ["single", "ddp-2"]
    assert results["recommendation"]["headline"].startswith("No recommendation")
    advice = run_here("advise", "--from", str(out / "results.json"))
    assert advice.returncode == 2
    assert "single diverged" in _one_line(advice.stderr)


def test_json_outputs_are_strict_and_say_which_numbers_were_not_finite(tmp_path):
    path = tmp_path / "m.json"
    outputs.write_json({"losses": [1.0, math.nan], "speed": {"max": math.inf}, "ok": 2}, path)
    data = _strict(path.read_text())
    assert data["losses"] == [1.0, None] and data["speed"] == {"max": None} and data["ok"] == 2
    note = data["non_finite_values"]
    assert note["count"] == 2 and note["values"] == {"losses[1]": "nan", "speed.max": "inf"}
    outputs.write_json({"fine": 1.5}, path)
    assert _strict(path.read_text()) == {"fine": 1.5}  # no note when nothing was replaced


def test_on_an_accelerator_the_loss_is_read_one_step_late_and_flushed():
    watch = finite.LossWatch(torch.device("meta"))  # any device but the CPU reads late
    where = [finite.Where(s, 1, s) for s in (1, 2, 3)]
    assert watch.see(torch.tensor(2.0), where[0]) is None
    assert watch.see(torch.tensor(float("nan")), where[1]) is None  # not read yet
    value, at = watch.flush()
    assert math.isnan(value) and at == where[1]
    assert watch.see(torch.tensor(float("nan")), where[2]) is None  # reported once only
    assert watch.first == 2.0 and watch.last == (1, 2.0)


def test_the_likely_cause_follows_the_batch_and_the_losses_before_it():
    x = torch.ones(4, 2)
    where = finite.Where(1, 1, 1)
    first_step = finite.likely_cause([(x, None)], where, None, 0.1, "fp16")
    assert "before any update" in first_step and "--precision fp16" in first_step
    later = finite.likely_cause([(x, None)], finite.Where(5, 1, 5), (2.0, 9.0), 3.0, "fp32")
    assert "learning rate too high (--lr 3)" in later and "grew from 2 to 9" in later
    y = torch.tensor([1.0, math.inf, 0.0, 0.0])  # a non-finite float target counts too
    assert "non-finite inputs (1 of the 4 rows" in finite.likely_cause(
        [(x, y)], where, None, 0.1, "fp32"
    )


def test_a_resumed_run_names_the_last_finite_loss_from_before_its_restart():
    watch = finite.LossWatch(torch.device("cpu"))
    watch.remember([2.5, 2.25, 2.0])  # the checkpoint's losses
    value, where = watch.see(torch.tensor(math.inf), finite.Where(4, 2, 1))
    found = finite.divergence(value, where, watch, [(torch.ones(2, 2), None)], _Cfg())
    assert "the loss became inf at step 4" in found.message()
    assert "the last finite loss was 2 (step 3)" in found.message()


class _Cfg:
    lr, precision = 0.5, "fp32"
