"""compare with fsdp runs: the memory check and its claim, and fsdp kept out of DDP's claims."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from compare_fakes import comm, context, fsdp_comm, run
from dpwise.compare import checks
from dpwise.compare.claims import claims
from dpwise.measure import profile
from dpwise.results.filters import one_process_per_device, sharded

MIB = 2**20
CPU_ENV = {"device_type": "cpu", "gpus": 0}
FSDP_CLAIM = "FSDP needs less memory per device than DDP"


def _cpu_runs(ddp_peak: int, fsdp_peak: int) -> list:
    return [
        run("single", 1000, peak=60 * MIB),
        run("ddp-1", 900, peak=60 * MIB),
        run("ddp-2", 800, peak=ddp_peak, comm=comm(0.1)),
        run("fsdp-2", 700, peak=fsdp_peak, comm=fsdp_comm(0.2)),
    ]


def test_fsdp_below_ddp_passes_the_memory_check_on_the_cpu_with_both_peaks():
    result = checks.MEMORY(context(_cpu_runs(40 * MIB, 30 * MIB), device_type="cpu"))
    assert result.status == "pass"
    f = result.figures
    assert (f["ddp_peak_bytes"], f["fsdp_peak_bytes"]) == (40 * MIB, 30 * MIB)
    assert f["fsdp_over_ddp"] == pytest.approx(0.75)
    assert (f["ddp_run"], f["fsdp_run"], f["fsdp_vs_ddp_world_size"]) == ("ddp-2", "fsdp-2", 2)
    assert "fsdp × 2 30.0 MiB, ddp × 2 40.0 MiB" in result.summary
    assert "cannot be tested on the CPU" in result.summary  # DP against DDP still cannot
    assert "at most 1.0 MiB" in result.explanation  # (1 - 1/2) of 2,000,000 parameter bytes


def test_fsdp_not_below_ddp_warns_with_both_peaks():
    result = checks.MEMORY(context(_cpu_runs(30 * MIB, 33 * MIB), device_type="cpu"))
    assert result.status == "warn"
    assert result.figures["fsdp_over_ddp"] == pytest.approx(33 / 30)
    assert "did not need less than DDP" in result.summary and "33.0 MiB" in result.summary


def test_a_gap_under_one_gradient_copy_is_said_to_be_no_measurable_difference():
    # the fakes' fsdp run has 2,000,000 bytes of gradients (1.9 MiB)
    close = checks.MEMORY(context(_cpu_runs(30 * MIB, 29 * MIB), device_type="cpu"))
    # a pass needs a difference that can be measured (0.977 and 0.996 used to pass)
    assert close.status == "warn" and close.figures["fsdp_within_one_gradient_copy"] is True
    assert "no measurable difference" in close.explanation
    assert "FSDP no measurable difference from DDP" in close.summary
    row = _claims(_cpu_runs(30 * MIB, 29 * MIB))[FSDP_CLAIM]
    assert row["verdict"] == "not measurable here"
    assert "under one copy of the gradients" in row["why"]
    far = checks.MEMORY(context(_cpu_runs(40 * MIB, 30 * MIB), device_type="cpu"))
    assert far.figures["fsdp_within_one_gradient_copy"] is False
    assert "no measurable difference" not in far.explanation


def test_fsdp_without_ddp_of_its_size_is_skipped_without_fsdp_figures():
    runs = [run("single", 1000), run("ddp-1", 900), run("fsdp-2", 700)]
    result = checks.MEMORY(context(runs, device_type="cpu"))
    assert result.status == "skip"
    assert "no ddp run of a sharded run's world size" in result.summary
    assert "fsdp_over_ddp" not in result.figures


def test_without_fsdp_the_cpu_memory_check_still_skips():
    runs = [run("single", 1000), run("ddp-1", 900), run("ddp-2", 800)]
    result = checks.MEMORY(context(runs, device_type="cpu"))
    assert result.status == "skip" and "fsdp_over_ddp" not in result.figures


def test_on_gpus_the_worse_of_the_dp_and_fsdp_comparisons_decides():
    runs = [
        run("single", 1000, peak=100 * MIB),
        run("dp-2", 1000, peak=100 * MIB),
        run("ddp-2", 1000, peak=50 * MIB),  # the guide's half: held
        run("fsdp-2", 1000, peak=55 * MIB),  # FSDP above DDP: warn
    ]
    result = checks.MEMORY(context(runs, device_type="cuda"))
    assert result.status == "warn"
    assert result.figures["ddp_over_dp"] == pytest.approx(0.5)
    assert result.figures["fsdp_over_ddp"] == pytest.approx(1.1)
    lower = [*runs[:3], run("fsdp-2", 1000, peak=30 * MIB)]
    assert checks.MEMORY(context(lower, device_type="cuda")).status == "pass"


def test_fsdp_alone_on_gpus_is_measured_not_skipped():
    runs = [
        run("single", 1000),
        run("ddp-2", 1000, peak=50 * MIB),
        run("fsdp-2", 1000, peak=30 * MIB),
    ]
    result = checks.MEMORY(context(runs, device_type="cuda"))
    assert result.status == "pass" and "no dp and ddp run of the same size" in result.summary


def _claims(runs: list, device_type: str = "cpu") -> dict[str, dict[str, str]]:
    ctx = context(runs, device_type=device_type)
    outcomes = {check: check(ctx) for check in checks.CHECKS}
    return {c.claim: c.to_json() for c in claims(runs, outcomes, CPU_ENV, None)}


def test_the_claims_gain_fsdp_s_memory_row_with_the_measured_ratio_and_its_source():
    by = _claims(_cpu_runs(40 * MIB, 30 * MIB))
    row = by[FSDP_CLAIM]
    assert row["verdict"] == "held"
    assert row["measured"] == (
        "FSDP / DDP peak per process at 2 processes = 0.750 (FSDP 30.0 MiB, DDP 40.0 MiB)"
    )
    assert "FSDP docs" in row["source"] and "ZeRO" in row["source"]
    assert "saved 10.0 MiB" in row["why"]
    worse = _claims(_cpu_runs(30 * MIB, 33 * MIB))[FSDP_CLAIM]
    assert worse["verdict"] == "did not hold" and "3.0 MiB above DDP's" in worse["why"]


def test_the_fsdp_row_is_absent_unless_fsdp_and_ddp_ran_at_one_size():
    assert FSDP_CLAIM not in _claims([run("single", 1000), run("ddp-2", 800)])
    assert FSDP_CLAIM not in _claims([run("single", 1000), run("fsdp-2", 800)])


def test_fsdp_runs_are_not_ddp_s_side_of_the_guide_s_claims():
    runs = _cpu_runs(40 * MIB, 30 * MIB)
    assert [r.id for r in one_process_per_device(runs)] == ["ddp-1", "ddp-2"]
    assert [r.id for r in sharded(runs)] == ["fsdp-2"]
    # scalability is DDP's curve: fsdp × 2 beside ddp × 2 is not a second world size
    alone = [run("single", 1000), run("ddp-2", 800), run("fsdp-2", 700)]
    assert checks.SCALABILITY(context(alone)).status == "skip"
    assert len(checks.SCALABILITY(context(runs)).table["rows"]) == 2
    # communication: DDP's verdict; fsdp's all-gathers and reduce-scatters shown beside it
    only_fsdp = [run("single", 1000), run("fsdp-2", 700, comm=fsdp_comm(0.9))]
    assert checks.COMMUNICATION(context(only_fsdp)).status == "skip"
    result = checks.COMMUNICATION(context(runs))
    assert result.status == "pass" and set(result.figures) == {"ddp-2"}
    assert [row[0] for row in result.table["rows"]] == ["ddp × 2"]
    said = "fsdp × 2 per step: 5.0 all-gathers (3.8 MiB, 2.00 ms) and 3.0 reduce-scatters"
    assert said in result.explanation


def _event(name: str, start: float, us: float, shapes: list, thread: int = 0):
    return SimpleNamespace(
        name=name,
        device_type=profile.DeviceType.CPU,
        time_range=SimpleNamespace(start=start, end=start + us, elapsed_us=lambda: us),
        input_shapes=shapes,
    )


def test_collectives_take_the_requested_op_whatever_the_backend_ran():
    # gloo carries out FSDP's reduce-scatter as "gloo:all_reduce" of the whole gradient
    events = [
        _event(profile.STEP_MARK, 0, 100, []),
        _event("c10d::_allgather_base_", 1, 5, [[100], [50], [], [], []]),
        _event("gloo:all_gather", 2, 10, [[50]]),
        _event("c10d::_reduce_scatter_base_", 20, 5, [[50], [100], [], [], [], []]),
        _event("c10d::allreduce_", 21, 5, [[[8]], [], []]),
        _event("gloo:all_reduce", 22, 10, [[100]]),  # the reduce-scatter's
        _event("gloo:all_reduce", 40, 4, [[8]]),  # the all-reduce's
    ]
    windows = profile.step_windows(events, skip=0)
    out = profile.collectives(events, windows, element_size=4)
    ops = {o["op"]: o["count_per_step"] for o in out["collectives"]}
    assert ops == {"all_reduce": 1, "broadcast": 0, "all_gather": 1, "reduce_scatter": 1}
    assert out["bytes_all_reduced_per_step"] == 8 * 4
    assert out["bytes_all_gathered_per_step"] == 100 * 4
    assert out["bytes_reduce_scattered_per_step"] == 100 * 4


@pytest.mark.slow
def test_compare_with_fsdp_measures_the_memory_check_and_reports_both_peaks(
    tmp_path: Path, run_here
):
    out = tmp_path / "cmp"
    args = ["--strategies", "single,ddp,fsdp", "--model", "transformer", "--epochs", "2"]
    args += ["--model-arg", "dim=32", "--model-arg", "heads=2"]  # its two blocks, narrower
    args += ["--world-sizes", "2"]
    args += ["--repeats", "1", "--max-steps", "4", "--profile-steps", "2", "--quiet"]
    done = run_here("compare", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr[-2000:]
    results = json.loads((out / "results.json").read_text())
    memory = next(c for c in results["checks"] if c["name"] == "memory")
    assert memory["status"] in ("pass", "warn")
    f = memory["figures"]
    assert f["ddp_peak_bytes"] > 0 and f["fsdp_peak_bytes"] > 0
    assert f["fsdp_over_ddp"] == pytest.approx(f["fsdp_peak_bytes"] / f["ddp_peak_bytes"])
    fsdp = next(r for r in results["runs"] if r["id"] == "fsdp-2")
    ops = {o["op"]: o["count_per_step"] for o in fsdp["communication"]["collectives"]}
    assert ops["all_gather"] >= 1 and ops["reduce_scatter"] >= 1 and ops["all_reduce"] == 0
    # fsdp's link probe times its own collectives too; the top-level probe is ddp's at equal size
    assert list(fsdp["link_probe"]["ops"]) == ["all_reduce", "reduce_scatter", "all_gather"]
    assert results["link_probe"]["run"] == "ddp-2"
    for name in ("report.md", "report.html"):
        report = (out / name).read_text()
        for key in ("ddp_peak_bytes", "fsdp_peak_bytes"):
            assert f"{f[key] / MIB:.1f} MiB" in report, name
        assert FSDP_CLAIM in report and "FSDP / DDP peak per process" in report, name
    # the projection adds fsdp's no-overlap bound beside ddp, and keeps no buckets for fsdp
    projection = results["projection"]
    assert projection["fsdp"].startswith("projected with no overlap")
    assert all(s["fsdp"] for s in projection["series"])
    assert "buckets" not in fsdp["communication"]
