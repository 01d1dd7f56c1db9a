"""Models that are not like dpwise's own (tests/fixtures/trapmodels.py): buffers updated in
forward, bf16 parameters, a head picked by the batch, a reentrant checkpoint that starves a block,
tied weights, sparse embeddings, SyncBatchNorm. Each is named for what it is, and a strategy that
cannot run one is refused before anything starts."""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import replace

import pytest
import torch

from compare_fakes import CLEAN, context, run
from conftest import FIXTURES
from dpwise.compare import checks
from dpwise.compare.checks.contention import impossible, machine_load
from dpwise.compare.verdict import recommend
from dpwise.diagnosis import probe_workload
from dpwise.diagnosis.buffers import MutatedBuffer
from dpwise.errors import DpwiseError
from dpwise.measure import agreement, load
from dpwise.results.records import Spread
from dpwise.strategies import refusal
from dpwise.strategies.fsdp import ROOT, unit_names
from dpwise.train import preflight
from dpwise.train.config import TrainConfig
from dpwise.workload.spec import workload_for

sys.path.insert(0, str(FIXTURES))
import trapmodels


def _workload(name: str):
    return workload_for(TrainConfig(model=f"trapmodels:{name}")).validate()


# -- the model probe: what the forward changes, what it uses on which batch -----------------------
def test_the_probe_names_buffers_the_forward_updates_and_whether_the_loss_reads_them():
    ema = probe_workload(_workload("ema_model"), 0).buffers
    assert [(b.name, b.module, b.kind, b.used) for b in ema] == [
        ("steps", "", "EmaTracker", False),
        ("ema", "", "EmaTracker", False),
    ]
    norm = probe_workload(_workload("running_norm_model"), 0).buffers
    assert [(b.name, b.kind, b.used) for b in norm] == [("1.mean", "RunningNorm", True)]
    assert probe_workload(_workload("tied_pair_model"), 0).buffers == []


def test_a_head_picked_by_the_batch_is_used_on_some_batches_not_never():
    unused = probe_workload(_workload("branching_model"), 0).unused
    assert [layer.name for layer in unused.batches] == ["positive", "negative"]
    assert not unused.always and unused.batch_count > 2
    text = unused.describe()
    assert "used on some batches only" in text and "in any of" not in text


def test_a_block_behind_a_reentrant_checkpoint_gets_no_gradient_on_any_batch():
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad"):
        unused = probe_workload(_workload("reentrant_model"), 0).unused
    assert [layer.name for layer in unused.always] == ["block"] and not unused.batches
    assert f"on {unused.batch_count} different batches" in unused.describe()


# -- parameters and buffers apart, each against its dtype's tolerance ----------------------------
def test_parameters_and_buffers_are_told_apart_tied_names_included():
    kinds = agreement.Kinds.of(trapmodels.TiedPair())
    assert "out2.weight" in kinds.parameters and "out2.weight" not in kinds.trainable
    params, rest = agreement.Kinds.of(trapmodels.EmaTracker()).split(
        trapmodels.EmaTracker().state_dict()
    )
    assert rest == ["steps", "ema"] and "head.weight" in params


def test_a_bf16_parameter_one_ulp_apart_passes_and_an_fp32_one_does_not():
    value = torch.full((4,), 0.1, dtype=torch.bfloat16)
    ulp = torch.finfo(torch.bfloat16).eps * 0.0625  # 2**-11 at 0.1
    apart = value.float().add(ulp).to(torch.bfloat16)
    assert (apart.float() - value.float()).abs().max().item() == pytest.approx(2**-11)
    near = agreement.gap({"w": value}, {"w": apart}, ["w"], 1e-4)
    assert near.within and near.dtypes == ("bf16",) and near.max == pytest.approx(2**-11)
    wide = agreement.gap({"w": value.float()}, {"w": apart.float()}, ["w"], 1e-4)
    assert not wide.within and wide.beyond == ("w",)


def test_nan_is_beyond_any_tolerance():
    found = agreement.gap({"w": torch.zeros(2)}, {"w": torch.tensor([0.0, float("nan")])}, ["w"], 1)
    assert found.beyond == ("w",) and found.max == float("inf")


def _runs(param: float, buffer: float | None, beyond: tuple[str, ...] = ()):
    single, ddp = run("single", 1000), run("ddp-2", 1000, diff=param)
    detail = {
        "parameters": {"max": param, "beyond_tolerance": [] if param <= 1e-4 else ["w"]},
        "buffers": {"max": buffer, "beyond_tolerance": list(beyond)},
    }
    return [
        replace(single, max_buffer_diff_vs_single=0.0),
        replace(ddp, max_buffer_diff_vs_single=buffer, diff_vs_single=detail),
    ]


def test_buffers_that_differ_while_parameters_agree_are_named_not_blamed_on_kernels():
    why = replace(CLEAN, buffers=[MutatedBuffer("ema", "", "EmaTracker", False)])
    result = checks.CONVERGENCE(context(_runs(1.5e-8, 3.3e-2, ("ema",)), diagnosis=why))
    assert result.status == "warn"
    assert "parameters (tolerance 1.0e-04); buffers differ by up to 3.3e-02 (ema)" in (
        result.summary
    )
    assert "ema, updated in the forward of the model (EmaTracker), not read by the loss" in (
        result.explanation
    )
    assert "broadcast_buffers=True" in result.explanation
    assert "non-deterministic" not in result.explanation
    assert result.table["columns"][2] == "max |Δbuffer| vs single"


def test_a_buffer_the_loss_reads_is_named_as_the_cause_when_parameters_differ():
    why = replace(CLEAN, buffers=[MutatedBuffer("1.mean", "1", "RunningNorm", True)])
    assert why.known_cause.startswith("buffers updated from each process's rows")
    result = checks.CONVERGENCE(context(_runs(3e-3, 5e-2, ("1.mean",)), diagnosis=why))
    assert result.status == "fail"
    assert "1.mean, updated in the forward of 1 (RunningNorm)" in result.explanation
    assert "non-deterministic" not in result.explanation


def test_the_words_follow_the_parameters_dtype():
    why = replace(CLEAN, param_dtypes=["bf16"])
    result = checks.CONVERGENCE(context(_runs(3e-3, None), diagnosis=why))
    assert "held in bf16" in result.explanation and "no known cause" not in result.explanation
    assert "2 bf16 units in the last place" in result.summary


def test_parameters_no_run_trained_are_a_finding_not_an_agreement():
    still = agreement.Untrained(("block.0.weight",), 13_568, 13_828)
    why = replace(CLEAN, untrained=still)
    result = checks.CONVERGENCE(context(_runs(1e-9, None), diagnosis=why))
    assert result.status == "warn"
    assert "13,568 of 13,828 trainable parameter values never changed in any run" in (
        result.summary
    )
    assert "interchangeable" not in result.explanation + result.summary
    assert "use_reentrant=False" in result.explanation
    rec = recommend(_runs(1e-9, None), 1e-4, "cuda", untrained=still)
    assert any("never changed in any run" in r for r in rec.reasons)


def test_untrained_compares_the_final_states_with_the_seeds_initial_state():
    model = trapmodels.Reentrant()
    kinds = agreement.Kinds.of(model)
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    trained = {k: v.clone() for k, v in initial.items()}
    trained["head.weight"] += 1
    found = agreement.untrained(kinds, initial, [trained, trained])
    assert "head.weight" not in found.names and "block.0.weight" in found.names
    assert found.trainable_elements == sum(p.numel() for p in model.parameters())


# -- strategies that cannot run a model are refused before anything starts ----------------------
def test_fsdp_keeps_tied_parameters_in_one_unit():
    assert unit_names(trapmodels.TiedPair()) == ["inp", "twice", ROOT]


@pytest.mark.parametrize(
    ("model", "strategy", "device", "varying", "words"),
    [
        (trapmodels.SparseBag(), "fsdp", "cpu", "", "sparse gradients, which FSDP2 cannot"),
        (trapmodels.syncbn_model(), "ddp", "cpu", "", "SyncBatchNorm layers (1)"),
        (trapmodels.syncbn_model(), "fsdp", "cpu", "", "SyncBatchNorm"),
        (trapmodels.Branching(), "fsdp", "cuda", "2 Linear layers", "some steps and none"),
    ],
)
def test_a_strategy_that_cannot_run_the_model_says_why_in_one_line(
    model, strategy, device, varying, words
):
    reason = refusal(strategy, model, device, varying)
    assert reason and words in reason and "\n" not in reason


@pytest.mark.parametrize(
    ("model", "strategy", "device", "varying"),
    [
        (trapmodels.SparseBag(), "ddp", "cpu", ""),
        (trapmodels.syncbn_model(), "ddp", "cuda", ""),
        (trapmodels.syncbn_model(), "single", "cpu", ""),
        (trapmodels.TiedPair(), "fsdp", "cpu", ""),
        (trapmodels.Branching(), "ddp", "cpu", "2 Linear layers"),
    ],
)
def test_what_a_strategy_can_run_is_not_refused(model, strategy, device, varying):
    assert refusal(strategy, model, device, varying) is None


def test_sparse_gradients_with_adamw_are_one_line():
    with pytest.raises(DpwiseError, match=r"--optimizer adamw: emb \(sparse=True\)"):
        preflight.check_model(_workload("sparse_model"), "ddp", "cpu", "adamw")
    preflight.check_model(_workload("sparse_model"), "ddp", "cpu", "sgd")


def test_train_refuses_before_launch(run_here, tmp_path):
    for model, strategy in (("syncbn_model", "ddp"), ("sparse_model", "fsdp")):
        out = tmp_path / model
        args = ["--model", f"trapmodels:{model}", "--strategy", strategy, "--nproc", "2"]
        proc = run_here("train", *args, "--out", str(out))
        assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert not out.exists()


def test_compare_refuses_a_strategy_that_cannot_run_the_model_naming_the_others(run_here, tmp_path):
    args = ["--model", "trapmodels:syncbn_model", "--out", str(tmp_path / "c")]
    proc = run_here("compare", *args)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "SyncBatchNorm" in proc.stderr and "--strategies single,dp" in proc.stderr
    assert not (tmp_path / "c").exists()


# -- advise: never offers what cannot run, and its launch line runs -------------------------------
def _advise(run_here, *args):
    proc = run_here("advise", "--json", *args)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.parametrize("model", ["sparse_model", "branching_model"])
def test_advise_never_offers_fsdp_for_a_model_fsdp_cannot_run(run_here, model):
    for gpus in ("8", "2"):
        answer = _advise(
            run_here, "--gpus", gpus, "--model", f"trapmodels:{model}", "--optimizer", "sgd"
        )
        assert answer["strategy"] != "fsdp" and answer["runner_up"] != "fsdp", answer


def test_advise_on_sparse_gradients_with_its_default_adamw_is_one_line(run_here):
    proc = run_here("advise", "--model", "trapmodels:sparse_model")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--optimizer sgd" in proc.stderr


@pytest.mark.slow
def test_advise_launch_line_for_a_data_dependent_model_runs_as_printed(run_here, tmp_path):
    answer = _advise(run_here, "--gpus", "8", "--model", "trapmodels:branching_model")
    line = next(c for c in answer["launch"] if c.startswith("dpwise train"))
    assert answer["strategy"] == "ddp" and "--find-unused-parameters" in line
    args = shlex.split(line)[1:]
    args[args.index("--nproc") + 1] = "2"  # this machine has no 8 GPUs: two CPU processes
    proc = run_here(*args, "--epochs", "1", "--max-steps", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]


# -- a busy machine: figures the hardware cannot produce are contention --------------------------
def test_ratios_no_cpu_can_produce_are_contention_not_results():
    runs = [
        run("single", 115),
        run("dp", 5300, notes=["pass-through"], single_rate=115),
        run("ddp-2", 1100, single_rate=115),
    ]
    assert [r.id for r, _ in impossible(runs, "cpu", 2)] == ["dp", "ddp-2"]
    assert not impossible(runs, "cuda", 2)
    speed = checks.SPEED(context(runs, cpu_cores=2))
    assert speed.status == "warn" and "cannot produce, from contention" in speed.summary
    assert "ddp × 2 at 9.57× single (at most 2.50× on 2 cores)" in speed.summary
    scale = checks.SCALABILITY(context([*runs, run("ddp-1", 120, single_rate=115)], cpu_cores=2))
    assert scale.status == "warn" and scale.summary.startswith("contention, not scaling")
    rec = recommend(runs, 1e-4, "cpu", cores=2)
    assert rec.strategy == "single" and rec.status == "inconclusive"
    assert "contention" in rec.inconclusive_reason


def test_a_busy_machine_is_recorded_and_said():
    quiet = [replace(run("single", 1000), other_cpu_share=Spread(median=0.01, values=(0.01,)))]
    assert machine_load(quiet)["busy"] is False
    busy = [
        replace(r, other_cpu_share=Spread(median=0.6, values=(0.5, 0.6, 0.7)))
        for r in (run("single", 1000), run("ddp-2", 1100))
    ]
    found = machine_load(busy)
    assert found["busy"] and found["other_cpu_share"]["median"] == pytest.approx(0.6)
    rec = recommend(busy, 1e-4, "cpu", cores=2)
    assert rec.strategy == "single" and "the machine was busy" in rec.inconclusive_reason


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc/stat")
def test_other_processes_cpu_time_is_measured():
    import multiprocessing

    start = load.Mark.now()
    spinner = multiprocessing.get_context("fork").Process(target=_spin, args=(0.75,))
    spinner.start()
    spinner.join()
    span = load.Span.since(start)
    share = load.others_share([span])
    # the spinner had one core for 0.75 s of this span: at least a third of one core's share
    assert share is not None and share * span.cores * span.wall >= 0.25


def _spin(seconds: float) -> None:
    import time

    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def test_a_model_without_traps_still_passes_plainly():
    result = checks.CONVERGENCE(context(_runs(3e-8, 0.0), diagnosis=CLEAN))
    assert result.status == "pass" and "interchangeable" in result.explanation


# -- the optional model libraries: a torchvision that cannot load is named ------------------------
def _broken_torchvision(root):
    package = root / "torchvision"
    package.mkdir()
    (package / "__init__.py").write_text(
        'raise RuntimeError("operator torchvision::nms does not exist")\n'
    )
    info = root / "torchvision-0.99.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torchvision\nVersion: 0.99.0\n")
    (info / "RECORD").write_text("")
    return str(root)


@pytest.mark.slow
def test_a_torchvision_that_cannot_load_is_named_and_transformers_still_trains(tmp_path):
    pytest.importorskip("transformers")
    from conftest import run_cli

    env = {"PYTHONPATH": f"{_broken_torchvision(tmp_path)}:{FIXTURES}"}
    tiny = ["--model-arg", "n_layer=1", "--model-arg", "n_embd=16", "--model-arg", "n_head=2"]
    tiny += ["--model-arg", "vocab_size=64", "--epochs", "1", "--max-steps", "2", "--quiet"]
    proc = run_cli("train", "--model", "transformers:gpt2", *tiny, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "torchvision 0.99.0 cannot load against torch" in proc.stderr
    proc = run_cli("train", "--model", "timm:resnet18", "--quiet", env=env)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "timm needs torchvision, but the installed torchvision 0.99.0" in proc.stderr


@pytest.mark.slow
def test_t5_by_type_trains_as_a_seq2seq_lm_on_its_labels(run_here, tmp_path):
    pytest.importorskip("transformers")
    tiny = ["--model-arg", "d_model=16", "--model-arg", "d_ff=32", "--model-arg", "num_layers=1"]
    tiny += ["--model-arg", "num_heads=2", "--model-arg", "d_kv=8", "--model-arg", "vocab_size=64"]
    for model in ("transformers:t5", "transformers:T5ForConditionalGeneration"):
        proc = run_here("train", "--model", model, *tiny, "--epochs", "1", "--max-steps", "2")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "T5ForConditionalGeneration" in proc.stdout and "targets as labels" in proc.stdout


def test_train_without_out_says_it_wrote_nothing(run_here):
    proc = run_here("train", "--epochs", "1", "--max-steps", "2")
    assert proc.returncode == 0 and "wrote nothing: give --out DIR" in proc.stdout


@pytest.mark.slow
def test_fsdp_s_view_tensor_warning_is_said_once_with_whether_it_applies(run_here, tmp_path):
    from dpwise.launch import forking

    # the workers print to the fork server's stderr: one started under this test's capture
    forking.stop_now()
    args = ["--model", "trapmodels:view_model", "--strategy", "fsdp", "--nproc", "2"]
    proc = run_here("train", *args, "--epochs", "1", "--max-steps", "3", "--quiet")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("FSDP2 warns that a sharded unit") == 1
    assert "returned a view tensor" not in proc.stderr  # FSDP2's own, once per unit and step


def test_tiny_byte_counts_show_a_number_not_zero_mib():
    from dpwise.infra.units import mib

    assert mib(6_200) == "6.05 KiB" and mib(48) == "48 B"
    assert mib(3 * 2**20) == "3.0 MiB" and mib(0) == "0.0 MiB" and mib(None) == "–"


@pytest.mark.slow
def test_fsdp_trains_a_tied_pair_like_single_and_keeps_the_tie(run_here, tmp_path):
    from conftest import load_state, max_abs_diff

    model = ["--model", "trapmodels:tied_pair_model", "--epochs", "1", "--max-steps", "4"]
    assert run_here("train", *model, "--quiet", "--out", str(tmp_path / "s")).returncode == 0
    proc = run_here(
        "train", *model, "--strategy", "fsdp", "--nproc", "2", "--quiet", "--out",
        str(tmp_path / "f"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    single, fsdp = load_state(tmp_path / "s" / "final.pt"), load_state(tmp_path / "f" / "final.pt")
    assert max_abs_diff(single, fsdp) <= 1e-6
    assert torch.equal(fsdp["out.weight"], fsdp["out2.weight"])


def test_the_speed_check_always_says_how_busy_the_machine_was():
    quiet = [
        replace(r, other_cpu_share=Spread(median=0.03, max=0.05, values=(0.01, 0.03, 0.05)))
        for r in (run("single", 1000), run("ddp-2", 900))
    ]
    said = checks.SPEED(context(quiet, cpu_cores=2)).explanation
    assert "Other processes used 3 % of the machine's cores while the runs measured" in said
