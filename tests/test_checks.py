from dataclasses import replace

import pytest

from compare_fakes import CLEAN, comm, context, run
from dpwise.compare import checks
from dpwise.diagnosis import Layer, Unused
from dpwise.results.records import DevicePeak


def test_convergence_passes_within_tolerance():
    runs = [run("single", 1000), run("ddp-2", 900, diff=3e-8)]
    result = checks.CONVERGENCE(context(runs, tolerance=1e-4, diagnosis=CLEAN))
    assert result.status == "pass" and "3.0e-08" in result.summary
    assert result.figures["max_diff"] == {"ddp-2": 3e-8}


def test_convergence_failure_names_batchnorm_layers_and_the_fix():
    why = checks.Diagnosis(
        [Layer("features.1", "BatchNorm2d"), Layer("features.5", "BatchNorm2d")], [], "mean"
    )
    runs = [run("single", 1000), run("ddp-2", 900, diff=2e-3)]
    result = checks.CONVERGENCE(context(runs, tolerance=1e-4, diagnosis=why))
    assert result.status == "fail" and "ddp × 2" in result.summary
    assert "BatchNorm layers (2 BatchNorm2d layers: features.1, features.5)" in result.explanation
    assert "SyncBatchNorm.convert_sync_batchnorm" in result.explanation


def test_convergence_failure_names_every_cause_found():
    why = checks.Diagnosis([], [Layer("drop", "Dropout")], "sum", "bf16")
    result = checks.CONVERGENCE(
        context([run("single", 1), run("dp-3", 1, diff=1.0)], tolerance=1e-4, diagnosis=why)
    )
    assert why.known_cause == "random layers (1 Dropout layer: drop) and a sum-reduced loss"
    for text in ("1 Dropout layer: drop", "sum-reduced", "reduction='mean'", "--precision bf16"):
        assert text in result.explanation


def test_many_layers_are_grouped_not_listed():
    bn = [Layer(f"features.{i}.1", "BatchNorm2d") for i in range(49)]
    drop_path = [Layer(f"blocks.{i}.drop_path", "DropPath") for i in range(12)]
    why = checks.Diagnosis(bn, drop_path, "mean")
    result = checks.CONVERGENCE(
        context([run("single", 1), run("ddp-2", 1, diff=1.0)], tolerance=1e-4, diagnosis=why)
    )
    assert "49 BatchNorm2d layers, e.g. features.0.1, features.1.1, features.2.1, …" in (
        result.explanation
    )
    assert "12 DropPath layers, e.g. blocks.0.drop_path" in result.explanation
    assert "features.3.1" not in result.explanation and "blocks.3." not in result.explanation
    assert "features.3.1" not in why.known_cause
    assert "each device draws its own" in result.explanation and "p=0" in result.explanation


def test_a_pass_with_random_layers_does_not_claim_the_runs_are_the_same():
    why = checks.Diagnosis([], [Layer("drop", "Dropout")], "mean")
    runs = [run("single", 1), run("ddp-2", 1, diff=9.9e-5)]
    result = checks.CONVERGENCE(context(runs, tolerance=1e-4, diagnosis=why))
    assert result.status == "pass"
    assert "random layers (1 Dropout layer: drop)" in result.explanation
    assert "floating-point rounding" not in result.explanation


def test_no_known_cause_says_the_model_was_run():
    result = checks.CONVERGENCE(
        context([run("single", 1), run("ddp-2", 1, diff=1.0)], tolerance=1e-4, diagnosis=CLEAN)
    )
    assert CLEAN.known_cause is None
    assert "no known cause" in result.explanation
    assert "found no random layer" in result.explanation


def test_find_unused_parameters_is_explained_with_its_measured_cost():
    unused = Unused(sometimes=[Layer("blocks.1", "RandomSkip")], passes=6)
    why = checks.Diagnosis(
        [], [], "mean", unused=unused, ddp_options={"find_unused_parameters": True}
    )
    runs = [run("single", 1000), run("ddp-1", 800), run("ddp-2", 900)]
    result = checks.CONVERGENCE(context(runs, tolerance=1e-4, diagnosis=why))
    assert result.status == "pass"
    assert result.summary.endswith("; ddp ran with find_unused_parameters=True")
    assert result.figures["ddp_options"] == {"find_unused_parameters": True}
    assert "find_unused_parameters=True" in result.explanation
    assert "1 RandomSkip layer: blocks.1 (no gradient in some of 6 passes)" in result.explanation
    assert "1.25× single's time per sample" in result.explanation


def test_memory_on_the_cpu_reports_peaks_but_cannot_test_the_claim():
    runs = [run("single", 1000), run("dp", 1000, peak=100), run("ddp-1", 900, peak=136)]
    result = checks.MEMORY(context(runs, device_type="cpu"))
    assert result.status == "skip" and "cannot be tested on the CPU" in result.summary
    assert result.figures["peaks"] == {"single": 10 * 2**20, "dp": 100, "ddp-1": 136}


def test_memory_ratio_on_gpus_compares_the_same_world_size():
    gpu = [
        run("single", 1),
        run("dp-2", 1, peak=100),
        run("ddp-2", 1, peak=40),
        run("ddp-4", 1, peak=10),
    ]
    dp2 = gpu[1].memory
    extra = DevicePeak(rank=0, device="cuda:1", peak_bytes=50)
    gpu[1] = replace(gpu[1], memory=replace(dp2, per_device=(*dp2.per_device, extra)))
    held = checks.MEMORY(context(gpu, device_type="cuda"))
    assert held.status == "pass" and held.figures["ddp_over_dp"] == 0.4
    assert held.figures["dp_device0_imbalance"] == 2.0
    assert "device 0 holds 2.00× the rest" in held.summary
    worse = [run("single", 1), run("dp-2", 1, peak=100), run("ddp-2", 1, peak=90)]
    assert checks.MEMORY(context(worse, device_type="cuda")).status == "warn"


def test_memory_is_skipped_without_a_pair_of_the_same_size():
    assert (
        checks.MEMORY(context([run("single", 1), run("ddp-2", 1)], device_type="cuda")).status
        == "skip"
    )
    pair = [run("single", 1), run("dp-2", 1), run("ddp-4", 1)]
    assert checks.MEMORY(context(pair, device_type="cuda")).status == "skip"


def test_speed_ignores_the_cpu_pass_through_and_warns_when_nothing_beats_single():
    runs = [run("single", 1000), run("dp", 1100, notes=["pass-through"]), run("ddp-2", 450)]
    result = checks.SPEED(context(runs, repeats=3))
    assert result.status == "warn" and result.figures["fastest"] == "single"
    faster = checks.SPEED(context([run("single", 1000), run("ddp-2", 1800)], repeats=3))
    assert faster.status == "pass" and faster.figures["fastest"] == "ddp-2"


def test_speed_flags_drift_when_a_one_process_run_disagrees_with_single():
    runs = [run("single", 1000), run("ddp-1", 1250), run("ddp-2", 500)]
    result = checks.SPEED(context(runs, repeats=12))
    assert result.status == "warn" and result.figures["drift_suspected_in"] == ["ddp × 1"]
    assert "drifted" in result.summary and "quiet machine" in result.explanation
    steady = checks.SPEED(
        context([run("single", 1000), run("ddp-1", 960), run("ddp-2", 1900)], repeats=12)
    )
    assert steady.figures["drift_suspected_in"] == [] and steady.status == "pass"


def test_speed_names_a_slower_one_process_run_as_its_wrappers_cost_not_drift():
    runs = [run("single", 1000), run("ddp-1", 700)]
    result = checks.SPEED(context(runs, repeats=12))
    assert result.figures["drift_suspected_in"] == [] and result.status == "pass"
    assert list(result.figures["wrapper_cost_s_per_epoch"]) == ["ddp-1"]
    assert result.figures["wrapper_cost_s_per_epoch"]["ddp-1"] > 0
    assert "more per epoch" in result.summary and "wrapper" in result.explanation


def test_communication_flags_exposed_time_and_missing_bytes():
    ok = checks.COMMUNICATION(context([run("single", 1), run("ddp-2", 1, comm=comm(0.1))]))
    assert ok.status == "pass" and "10 %" in ok.summary
    heavy = checks.COMMUNICATION(context([run("single", 1), run("ddp-2", 1, comm=comm(0.6))]))
    assert heavy.status == "warn"
    partial = checks.COMMUNICATION(context([run("ddp-2", 1, comm=comm(0.1, reduced=1_000_000))]))
    assert partial.status == "warn"
    assert checks.COMMUNICATION(context([run("single", 1)])).status == "skip"


def test_scalability_efficiency_and_where_it_stops():
    runs = [run("single", 1000, threads=2), run("ddp-1", 950), run("ddp-2", 420)]
    result = checks.SCALABILITY(context(runs, device_type="cpu", cpu_cores=2))
    assert result.figures["stops_growing_at"] == 1
    assert abs(result.figures["efficiency"][2] - 0.21) < 1e-9
    assert result.status == "warn" and "1 of the 2 CPU cores" in result.explanation
    near = [run("single", 1000, threads=2), run("ddp-1", 950), run("ddp-2", 800)]
    assert (
        checks.SCALABILITY(context(near, device_type="cpu", cpu_cores=2)).status == "pass"
    )  # 0.8× single on one CPU
    gpu = [run("single", 1000), run("ddp-1", 1000), run("ddp-2", 1900, single_rate=1000)]
    assert checks.SCALABILITY(context(gpu, device_type="cuda", cpu_cores=64)).status == "pass"
    assert (
        checks.SCALABILITY(
            context([run("single", 1), run("ddp-2", 1)], device_type="cpu", cpu_cores=2)
        ).status
        == "skip"
    )


def test_speed_is_inconclusive_when_the_noise_cannot_separate_the_runs():
    runs = [run("single", 1000, spread=0.15), run("ddp-2", 1080, spread=0.15)]
    result = checks.SPEED(context(runs, repeats=12))
    assert result.status == "warn" and result.figures["inconclusive"] == ["ddp-2"]
    assert "inconclusive" in result.summary and "beyond the noise" not in result.summary
    assert "treat differences" not in result.explanation  # one story: the interval rule only


def test_a_one_process_group_shows_no_communication_figures():
    one = comm(0.28)
    for key in ("step_ms", "step_ms_without_sync", "exposed_ms", "exposed_share"):
        del one[key]  # compare no longer measures exposed time where nothing is exchanged
    result = checks.COMMUNICATION(
        context([run("single", 1), run("ddp-1", 1, comm=one), run("ddp-2", 1, comm=comm(0.1))])
    )
    rows = {row[0]: row for row in result.table["rows"]}
    assert "one process: nothing to exchange" in rows["ddp × 1"]
    assert "%" not in " ".join(rows["ddp × 1"])
    assert list(result.figures) == ["ddp-2"]
    alone = checks.COMMUNICATION(context([run("single", 1), run("ddp-1", 1, comm=one)]))
    assert alone.status == "skip"


@pytest.mark.parametrize(
    ("share", "status", "claim"), [(0.15, "pass", "held"), (0.30, "warn", "did not hold")]
)
def test_the_claim_and_the_communication_check_share_one_threshold(share, status, claim):
    from dpwise.compare.claims import claims

    runs = [run("single", 1000), run("ddp-2", 900, comm=comm(share))]
    check = checks.COMMUNICATION(context(runs))
    env = {"device_type": "cpu", "gpus": 0}
    ctx = context(runs)
    table = {c: c(ctx) for c in checks.CHECKS}
    assert table[checks.COMMUNICATION] == check
    by = {c["claim"]: c["verdict"] for c in (x.to_json() for x in claims(runs, table, env, None))}
    assert check.status == status
    assert by["DDP communicates asynchronously, so steps are not stalled by gradient sync"] == claim


def test_compare_runs_every_check_of_the_registry_once_in_order():
    names = [c.name for c in checks.CHECKS]
    assert names == ["convergence", "memory", "speed", "communication", "scalability"]
    ctx = context([run("single", 1000), run("dp", 990), run("ddp-1", 950), run("ddp-2", 900)])
    assert [c(ctx).name for c in checks.CHECKS] == names  # each result carries its check's name


def test_compare_help_counts_and_names_the_registry(capsys):
    from dpwise.cli import main

    with pytest.raises(SystemExit) as done:
        main(["compare", "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    names = ", ".join(c.name for c in checks.CHECKS)
    assert f"run the {len(checks.CHECKS)} validation checks ({names})" in text
