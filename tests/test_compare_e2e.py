"""`dpwise compare` end to end on the CPU: the report, its checks, and the BatchNorm failure."""

import json

import pytest

from conftest import run_cli

pytestmark = pytest.mark.slow
CHECKS = ["convergence", "memory", "speed", "communication", "scalability"]


@pytest.fixture(scope="module")
def default_report(tmp_path_factory):
    """The README's `dpwise compare` in a fresh process, as a user runs it, on a quarter of the
    default data: 10 steps an epoch (256 rows each), not 39; the model, the strategies, the
    checks and the report are the default's."""
    out = tmp_path_factory.mktemp("compare")
    args = ["--epochs", "2", "--repeats", "2", "--data-arg", "samples=2560"]
    proc = run_cli("compare", *args, "--out", str(out))
    return out, proc


def test_default_compare_passes_convergence_for_every_strategy(default_report):
    out, proc = default_report
    assert proc.returncode == 0, proc.stderr
    results = json.loads((out / "results.json").read_text())
    assert results["schema"] == 1
    assert [c["name"] for c in results["checks"]] == CHECKS
    checks = {c["name"]: c for c in results["checks"]}
    assert checks["convergence"]["status"] == "pass"
    assert [r["id"] for r in results["runs"]] == ["single", "dp", "ddp-1", "ddp-2"]
    assert all(r["max_param_diff_vs_single"] <= 1e-4 for r in results["runs"])
    for key in ("recommendation", "claims", "environment", "runs"):
        assert results[key]
    assert set(results["recommendation"]) >= {"strategy", "reasons"}
    # OpenMP threads sleep while they wait (dpwise.infra.hardware.quiet_waits), and the load
    # while the runs measured is recorded
    assert results["environment"]["omp_wait_policy"] == "PASSIVE"
    assert 0 <= results["load"]["other_cpu_share"]["median"] <= 1
    assert all(len(r["other_cpu_share"]["values"]) == 2 for r in results["runs"])


def test_measurements_are_real_numbers(default_report):
    out, _ = default_report
    results = json.loads((out / "results.json").read_text())
    single, ddp2 = results["runs"][0], results["runs"][-1]
    params = results["workload"]["parameter_bytes"]
    assert params == 517_642 * 4
    # live tensors at least hold parameters and gradients; DDP adds its bucket buffers
    assert single["memory"]["per_device"][0]["peak_bytes"] >= 2 * params
    ddp1 = results["runs"][2]
    assert (
        ddp1["memory"]["per_device"][0]["peak_bytes"]
        >= single["memory"]["per_device"][0]["peak_bytes"] + 0.9 * params
    )
    comm = ddp2["communication"]
    assert comm["bytes_all_reduced_per_step"] == pytest.approx(params, rel=0.01)
    assert {c["op"]: c["count_per_step"] for c in comm["collectives"]}["all_reduce"] >= 1
    assert len(ddp2["memory"]["per_device"]) == 2
    assert ddp2["threads_per_process"] == 1 and single["threads_per_process"] >= 1
    assert single["samples_per_s"]["min"] <= single["samples_per_s"]["median"]
    assert single["samples_per_s"]["median"] <= single["samples_per_s"]["max"]


def test_outputs_are_written(default_report):
    out, proc = default_report
    for name in (
        "report.html",
        "report.md",
        "results.json",
        "throughput.png",
        "loss.png",
        "projection.png",
    ):
        assert (out / name).is_file(), name
    for run in ("single", "dp", "ddp-1", "ddp-2"):
        trace = json.loads((out / "traces" / f"{run}.rank0.json").read_text())
        assert trace["traceEvents"]
    assert f"report: {out / 'report.html'}" in " ".join(proc.stdout.split())


def test_the_largest_ddp_run_probes_its_link_up_to_its_gradient_bytes(default_report):
    out, _ = default_report
    results = json.loads((out / "results.json").read_text())
    probe = results["link_probe"]
    assert probe["run"] == "ddp-2" and probe["world_size"] == 2 and probe["backend"] == "gloo"
    assert list(probe["ops"]) == ["all_reduce"]  # ddp's one collective
    points = probe["ops"]["all_reduce"]["points"]
    assert points[-1]["bytes"] == results["workload"]["parameter_bytes"]
    assert probe["ops"]["all_reduce"]["fit"]["beta_bytes_per_s"] > 0
    runs = {r["id"]: r for r in results["runs"]}
    assert runs["ddp-2"]["link_probe"]["ops"] == probe["ops"]
    assert runs["ddp-1"]["link_probe"] is None and runs["single"]["link_probe"] is None
    assert results["plots"]["link"] == "link.png" and (out / "link.png").is_file()
    assert "## Link probe" in (out / "report.md").read_text()


def test_the_report_carries_the_scaling_projection(default_report):
    out, proc = default_report
    results = json.loads((out / "results.json").read_text())
    projection = results["projection"]
    assert projection["status"] == "projected"
    ddp2 = results["runs"][-1]["communication"]
    # the guide's model fits DDP's first bucket cap (1 MiB) plus the rest: one 2,070,568-byte
    # bucket, as DDP's own logging data reports it; launched when backward ends
    assert ddp2["buckets"] == [{"bytes": 517_642 * 4, "ready_ms": 0.0}]
    assert projection["inputs"]["compute_ms"] == ddp2["step_ms_without_sync"]
    links = [s["link"] for s in projection["series"]]
    assert links == ["probe", "nvlink4", "ib-ndr", "eth-100g", "eth-10g"]  # the probed link first
    eth = projection["series"][-1]["ddp"]
    assert [p["devices"] for p in eth] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    assert eth[0]["efficiency"] > eth[-1]["efficiency"] > 0
    assert results["plots"]["projection"] == "projection.png"
    md = (out / "report.md").read_text()
    assert "Scaling projection (a projection, not a measurement)" in md
    assert "flat ring" in md and "nccl-tests/issues/267" in md
    assert "Scaling projection" in (out / "report.html").read_text()
    printed = " ".join(proc.stdout.split())
    assert "projection (a model, not a measurement" in printed and "eth-10g" in printed


def test_markdown_gives_the_same_verdict(default_report):
    out, _ = default_report
    results = json.loads((out / "results.json").read_text())
    md = (out / "report.md").read_text()
    headline = results["recommendation"]["headline"]
    assert headline in md and headline in (out / "report.html").read_text()
    assert md.index(headline) < md.index("convergence")


def test_batchnorm_cnn_does_not_pass_silently(tmp_path, run_here):
    proc = run_here(
        "compare",
        "--model",
        "cnn",
        "--model-arg",
        "channels=4",
        "--model-arg",
        "image_size=16",
        "--data-arg",
        "samples=256",
        "--data-arg",
        "image_size=16",
        "--batch-size",
        "64",
        "--epochs",
        "2",
        "--repeats",
        "1",
        "--quiet",
        "--out",
        str(tmp_path),
    )
    assert proc.returncode == 1, proc.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    convergence = results["checks"][0]
    assert convergence["status"] == "fail"
    assert "features.1, features.5" in convergence["explanation"]
    assert "SyncBatchNorm" in convergence["explanation"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--world-sizes", "1,3"], "use a multiple of 3"),
        (["--epochs", "1"], "the first is an untimed warm-up"),
        (["--strategies", "single,zero"], "--strategies zero: unknown"),
        (["--world-sizes", "1,x"], "not a comma-separated list of integers"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, run_here, args, message):
    """(A fresh process's: test_compare_processes, faults/test_bad_inputs, faults/test_messages.)"""
    out = tmp_path / "report"
    proc = run_here("compare", *args, "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and message in proc.stderr
    assert not out.exists()
