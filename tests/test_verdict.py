from compare_fakes import comm, run
from dpwise.compare.checks import COMMUNICATION, MEMORY, SCALABILITY
from dpwise.compare.claims import claims
from dpwise.compare.verdict import recommend
from dpwise.results.records import CheckResult

CPU_ENV = {"device_type": "cpu", "gpus": 0}


def test_single_wins_when_parallel_runs_are_measurably_slower():
    runs = [run("single", 1000), run("ddp-2", 600)]
    rec = recommend(runs, 1e-4, "cpu")
    assert (rec.strategy, rec.run, rec.runner_up) == ("single", "single", "ddp-2")
    assert rec.headline == "Use a single process on this machine for this model"
    assert rec.status == "recommended" and rec.inconclusive_reason is None
    assert rec.vs_single["ddp-2"]["outcome"] == "slower"


def test_a_difference_inside_the_noise_is_inconclusive_not_a_recommendation():
    runs = [run("single", 1000, spread=0.05), run("ddp-2", 1030, spread=0.05)]
    rec = recommend(runs, 1e-4, "cpu")
    assert rec.status == "inconclusive" and rec.run == "single"
    assert rec.headline.startswith("Inconclusive")
    assert "crosses the 5% margin" in rec.inconclusive_reason
    assert rec.reasons[0] == f"inconclusive: {rec.inconclusive_reason}"


def test_drift_the_report_detects_makes_the_verdict_inconclusive():
    # the busy machine of the issue: dp and ddp × 1 do single's work but ran 3× faster
    runs = [
        run("single", 1000, spread=0.3),
        run("dp", 3000, notes=["CPU pass-through"]),
        run("ddp-1", 3000),
        run("ddp-2", 3300),
    ]
    rec = recommend(runs, 1e-4, "cpu")
    assert rec.status == "inconclusive" and rec.strategy == "single"
    assert "ddp × 1" in rec.inconclusive_reason and "not steady" in rec.inconclusive_reason
    assert "Use ddp" not in rec.headline


def test_too_few_rounds_cannot_separate_runs():
    runs = [run("single", 1000, rounds=3), run("ddp-2", 1900, rounds=3)]
    rec = recommend(runs, 1e-4, "cuda")
    assert rec.status == "inconclusive" and "raise --repeats" in rec.inconclusive_reason


def test_a_clearly_faster_faithful_run_is_recommended():
    runs = [run("single", 1000), run("ddp-2", 1900), run("ddp-4", 3000, diff=1e-2)]
    rec = recommend(runs, 1e-4, "cuda")
    assert (rec.strategy, rec.world_size) == ("ddp", 2)  # ddp-4 changed the model
    assert "1.90× the single process (95% interval" in rec.reasons[0]
    assert rec.status == "recommended" and rec.vs_single["ddp-2"]["outcome"] == "faster"


def test_the_cpu_pass_through_is_never_recommended_as_dp():
    runs = [run("single", 1000), run("dp", 1200, notes=["pass-through"])]
    assert recommend(runs, 1e-4, "cpu").strategy == "single"


def _checks(memory_ratio=None, efficiency=None, comm_figures=None):
    def result(check, figures):
        return CheckResult(
            name=check.name, status="warn", summary="", explanation="", figures=figures
        )

    return {
        MEMORY: result(MEMORY, {"ddp_over_dp": memory_ratio}),
        SCALABILITY: result(SCALABILITY, {"efficiency": efficiency or {}}),
        COMMUNICATION: result(COMMUNICATION, comm_figures or {}),
    }


def test_claims_on_a_cpu_machine():
    runs = [run("single", 1000), run("dp", 1000), run("ddp-1", 900), run("ddp-2", 450)]
    table = [
        c.to_json()
        for c in claims(runs, _checks(1.36, {1: 0.9, 2: 0.22}, {"ddp-2": comm(0.5)}), CPU_ENV, 1e-8)
    ]
    by = {c["claim"]: c for c in table}
    assert by["DDP uses ≈ 50 % less memory than DataParallel"]["verdict"] == "cannot be tested"
    assert by["DataParallel saturates around 4 GPUs"]["verdict"] == "cannot be tested"
    assert by["DDP scales almost linearly with GPU count"]["verdict"] == "cannot be tested"
    assert by["DP and DDP parameters agree within 1e-4 after training"]["verdict"] == "held"
    async_claim = "DDP communicates asynchronously, so steps are not stalled by gradient sync"
    assert by[async_claim]["verdict"] == "did not hold"
    assert all(c["source"].startswith("guide") for c in table)


def test_claims_on_gpus():
    env = {"device_type": "cuda", "gpus": 8}
    runs = [run("single", 1000), run("dp-8", 2000), run("ddp-8", 7000, single_rate=1000)]
    table = [
        c.to_json()
        for c in claims(runs, _checks(0.45, {1: 1.0, 8: 0.875}, {"ddp-8": comm(0.05)}), env, 5e-5)
    ]
    by = {c["claim"]: c["verdict"] for c in table}
    assert by["DDP uses ≈ 50 % less memory than DataParallel"] == "held"
    assert by["DDP finishes faster than DataParallel, especially on > 4 GPUs"] == "held"
    assert by["DDP scales almost linearly with GPU count"] == "held"


def test_one_process_runs_and_small_margins_never_beat_single():
    assert recommend([run("single", 1000), run("ddp-1", 1200)], 1e-4, "cpu").run == "single"
    close = [run("single", 1000, spread=0.0), run("ddp-2", 1030, spread=0.0)]
    rec = recommend(close, 1e-4, "cpu")
    assert rec.run == "single" and any("no GPU" in r for r in rec.reasons)
    fast = recommend([run("single", 1000), run("ddp-2", 1500, threads=1)], 1e-4, "cpu")
    assert fast.run == "ddp-2" and not any("no GPU" in r for r in fast.reasons)


def test_a_known_cause_keeps_a_diverging_run_in_the_running():
    runs = [run("single", 1000), run("ddp-2", 1900, diff=1e-2)]
    assert recommend(runs, 1e-4, "cuda").run == "single"
    rec = recommend(runs, 1e-4, "cuda", known_cause="BatchNorm (bn1)")
    assert rec.run == "ddp-2"
    assert "because of BatchNorm (bn1)" in rec.reasons[-1]


def test_advise_from_results_passes_an_inconclusive_verdict_on(tmp_path, capsys):
    import json

    from conftest import FIXTURES
    from dpwise.cli import main

    results = json.loads((FIXTURES / "results_sample.json").read_text())
    runs = [run("single", 1000, spread=0.05), run("ddp-2", 1030, spread=0.05)]
    results["recommendation"] = recommend(runs, 1e-4, "cpu").to_json()
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    assert main(["advise", "--json", "--from", str(path)]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["strategy"] == "single"
    assert answer["measurement_status"] == "inconclusive"
    reason = results["recommendation"]["inconclusive_reason"]
    assert answer["inconclusive_reason"] == reason
    assert "inconclusive" in answer["reasons"][0] and reason in answer["reasons"][0]
