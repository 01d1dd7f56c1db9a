"""`dpwise advise` and `dpwise env` through the command line."""

import json
import resource

import pytest

from conftest import FIXTURES, run_cli
from dpwise.cli import main

SEVEN_B = [
    "--model",
    "transformer",
    "--model-arg",
    "layers=32",
    "--model-arg",
    "dim=4096",
    "--model-arg",
    "heads=32",
    "--model-arg",
    "vocab=32000",
]


def _json(capsys, *args):
    assert main(["advise", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_answer_has_the_contract_keys(capsys):
    answer = _json(capsys, "--gpus", "2", "--device-memory", "24")
    for key in ("strategy", "rule", "reasons", "runner_up", "memory", "facts"):
        assert key in answer
    assert (answer["strategy"], answer["rule"]) == ("ddp", "production-few-gpus")
    ddp = answer["memory"]["ddp"]
    assert ddp["world_size"] == 2 and len(ddp["per_device"]) == 2
    assert ddp["per_device"][0]["bytes"] == sum(ddp["per_device"][0]["breakdown"].values())
    facts = answer["facts"]
    assert facts["gpus"] == {"value": 2, "source": "given", "note": ""}
    assert facts["gloo_available"]["source"] == "detected"
    assert facts["goal"]["source"] == "assumed"


def test_cpu_machine_is_detected(capsys):
    answer = _json(capsys)
    assert (answer["strategy"], answer["rule"]) == ("single", "cpu-only")
    assert answer["facts"]["gpus"] == {"value": 0, "source": "detected", "note": ""}


def test_seven_billion_parameters_without_allocating_them():
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    proc = run_cli("advise", "--json", "--gpus", "8", "--precision", "bf16", *SEVEN_B)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["model"]["method"] == "meta-trace"
    assert 6.0e9 < answer["model"]["parameters"] < 7.5e9
    assert (answer["strategy"], answer["rule"]) == ("fsdp", "model-does-not-fit")
    peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert max(peak_kib, before) < 3 * 1024**2  # < 3 GiB: the 26 GB of weights never existed


def test_from_results_takes_precedence(tmp_path, capsys):
    results = json.loads((FIXTURES / "results_sample.json").read_text())
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    answer = _json(capsys, "--from", str(path), "--gpus", "4")
    assert (answer["strategy"], answer["rule"], answer["measured"]) == (
        "single",
        "measured-results",
        True,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--gpus", "-1"], "--gpus must be 0 or more"),
        (["--nodes", "0"], "--nodes must be at least 1"),
        (["--params", "0"], "'0' is less than one parameter"),
        (["--params", "0.5"], "'0.5' is less than one parameter"),
        (["--device-memory", "0"], "--device-memory must be positive"),
        (["--momentum", "-0.9"], "--momentum must be at least 0.0, got -0.9"),  # train's check
        (["--precision", "fp8"], "invalid choice: 'fp8'"),
        (["--model", "nosuch.mod:f", "--data", "x:y"], "cannot import nosuch.mod"),
        (["--model", "simple", "--params", "10"], "give --model or --params, not both"),
        (["--from", "/nonexistent/results.json"], "cannot read it"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, message, capsys):
    assert main(["advise", *args]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err


def test_from_file_that_is_not_a_results_json(tmp_path, capsys):
    bad = tmp_path / "r.json"
    bad.write_text("{not json")
    assert main(["advise", "--from", str(bad)]) == 2
    assert "not JSON" in capsys.readouterr().err
    bad.write_text(json.dumps({"schema": 2}))
    assert main(["advise", "--from", str(bad)]) == 2
    assert "not a dpwise compare results.json" in capsys.readouterr().err


def test_env_json_reports_the_environment():
    proc = run_cli("env", "--json", env={"LOCAL_RANK": "0", "NCCL_DEBUG": "INFO"})
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    import torch

    assert info["torch"] == torch.__version__ and info["dpwise"]
    assert info["gloo_available"] is True
    assert info["cpu_cores"] >= 1 and info["torch_threads"] >= 1
    assert len(info["gpus"]) == torch.cuda.device_count()
    assert info["launcher_env"] == {"LOCAL_RANK": "0", "NCCL_DEBUG": "INFO"}
    text = run_cli("env").stdout
    assert "gloo_available" in text and torch.__version__ in text


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("7e9", 7_000_000_000),
        ("7B", 7_000_000_000),
        ("350M", 350_000_000),
        ("1.3b", 1_300_000_000),
        ("7_000_000_000", 7_000_000_000),
        ("1.5T", 1_500_000_000_000),
    ],
)
def test_params_accepts_the_ways_model_sizes_are_written(text, count, capsys):
    answer = _json(capsys, "--gpus", "8", "--device-memory", "100000", "--params", text)
    assert answer["model"]["parameters"] == count
    assert answer["model"]["method"] == "parameter-count"
    assert "--model PKG.MODULE:MODEL_FACTORY" in answer["launch"][-1]  # not the built-in model


@pytest.mark.parametrize("text", ["7GB", "seven", "1..3", "-5"])
def test_params_refuses_other_text_in_one_line(text, capsys):
    assert main(["advise", "--params", text]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"'{text}' is not a parameter count; write it like 7e9, 7B, 350M" in err


@pytest.mark.parametrize("text", ["1e400", "2e18"])
def test_params_beyond_counting_is_one_line_not_an_overflow(text, capsys):
    assert main(["advise", "--params", text]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"'{text}' is more than 1e+18 parameters" in err


def test_help_shows_the_size_formats(capsys):
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    assert "7e9, 7B, 350M, 1.3b, 1.5T" in " ".join(capsys.readouterr().out.split())


WORKLOAD = ["--model", "userpkg:tiny_model", "--model-arg", "width=16"]
WORKLOAD += ["--data", "userpkg:tiny_data", "--data-arg", "samples=96"]


def test_launch_line_trains_the_users_model(userpkg, capsys):
    answer = _json(capsys, "--gpus", "2", "--batch-size", "32", *WORKLOAD)
    assert answer["launch"][-1] == (
        "dpwise train --strategy ddp --nproc 2 " + " ".join(WORKLOAD) + " --batch-size 32"
    )


def test_from_results_launches_the_compared_workload(userpkg, tmp_path, capsys):
    results = json.loads((FIXTURES / "results_sample.json").read_text())
    results["workload"].update(
        model="userpkg:tiny_model",
        model_args={"width": 16},
        data="userpkg:tiny_data",
        data_args={"samples": 96},
    )
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    answer = _json(capsys, "--from", str(path))
    assert answer["launch"][-1] == (
        "dpwise train --strategy single " + " ".join(WORKLOAD) + " --batch-size 256 "
        "--precision fp32"
    )
    assert answer["model"]["parameters"] == 4 * 16 + 16 + 16 * 2 + 2


def test_from_inconclusive_results_says_so(tmp_path, capsys):
    results = json.loads((FIXTURES / "results_sample.json").read_text())
    why = "the speed check found the machine's speed drifting by 3×"
    results["recommendation"].update(status="inconclusive", inconclusive_reason=why)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert main(["advise", "--from", str(path), "--gpus", "4"]) == 0
    text = capsys.readouterr().out
    assert "measurements inconclusive, so the rules answer" in text
    assert f"inconclusive: {why}" in text
    answer = _json(capsys, "--from", str(path), "--gpus", "4")
    assert (answer["measurement_status"], answer["inconclusive_reason"]) == ("inconclusive", why)
    assert answer["rule"] == "single-node-4-plus-gpus"


@pytest.mark.parametrize(
    ("model", "data"), [("batchnorm_net", "images"), ("reads_values", "vectors")]
)
def test_models_the_meta_trace_cannot_run_are_advised(model, data, userpkg, capsys):
    assert (
        main(["advise", "--model", f"estimate_models:{model}", "--data", f"estimate_models:{data}"])
        == 0
    )
    text = capsys.readouterr().out
    assert "Memory per device (estimate, measured-cpu" in text and "  how: " in text


def test_dataparallel_text_agrees_with_its_own_table(capsys):
    answer = _json(capsys, "--gpus", "4", "--batch-size", "256")
    dp, ddp = (answer["memory"][k]["peak_bytes"] for k in ("dp", "ddp"))
    (sentence,) = [r for r in answer["reasons"] if r.startswith("DataParallel's device 0")]
    assert dp < ddp and "no more than ddp's" in sentence  # SimpleModel: the buckets weigh more
    assert "carries the optimizer" not in " ".join(answer["reasons"])


def test_a_results_json_written_before_fsdp_still_advises(tmp_path, capsys):
    """A schema-1 file from before fsdp (runs single, dp, ddp-2): its measured ddp answer launches
    with dpwise's own command, and the estimate covers every strategy known now."""
    results = json.loads((FIXTURES / "results_sample.json").read_text())
    assert {r["strategy"] for r in results["runs"]} == {"single", "dp", "ddp"}
    results["recommendation"].update(strategy="ddp", world_size=2, run="ddp-2")
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    answer = _json(capsys, "--from", str(path))
    assert (answer["strategy"], answer["rule"], answer["world_size"]) == (
        "ddp",
        "measured-results",
        2,
    )
    assert answer["launch"] == [
        "torchrun --nproc_per_node 2 train.py",
        "dpwise train --strategy ddp --nproc 2 --batch-size 256 --precision fp32",
    ]
    fsdp = answer["memory"]["fsdp"]["per_device"][0]["breakdown"]
    assert fsdp["fsdp_gathered_units"] > 0 and fsdp["fsdp_unsharded_gradient"] > 0
