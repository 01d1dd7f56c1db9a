"""The scaling projection: the ring model against hand-computed cases, the links, the section,
advise citing it and the options' refusals."""

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from torch.autograd import DeviceType

from conftest import FIXTURES
from dpwise.cli import main
from dpwise.errors import DpwiseError
from dpwise.measure import profile
from dpwise.measure.buckets import step_buckets
from dpwise.projection import links, model, section
from dpwise.projection.links import PRESETS, Link, custom, link_from_probe
from dpwise.projection.model import Bucket, Inputs, project_ddp, ring_all_reduce_ms

GB = 1e9


def link(beta=1 * GB, alpha=0.0, node=None) -> Link:
    return Link(
        name="t",
        label="t",
        alpha_s=alpha,
        beta_bytes_per_s=beta,
        basis="custom",
        source="test",
        node_devices=node,
    )


def inputs(buckets, compute_ms=100.0, batch=32) -> Inputs:
    return Inputs(
        run="ddp-2",
        measured_world=2,
        compute_ms=compute_ms,
        per_device_batch=batch,
        gradient_bytes=sum(b.bytes for b in buckets),
        buckets=tuple(buckets),
    )


def test_one_bucket_is_fully_exposed():
    # 1 GB over 4 devices at 1 GB/s: 2·3/4 · 1 s = 1500 ms, nothing to hide it behind
    p = project_ddp(inputs([Bucket(10**9, 0.0)]), link(), 4)
    assert p.exposed_ms == pytest.approx(1500.0)
    assert p.step_ms == pytest.approx(1600.0)
    assert p.efficiency == pytest.approx(100 / 1600)
    assert p.samples_per_s == pytest.approx(4 * 32 / 1.6)


def test_many_early_buckets_are_hidden_behind_backward():
    # 4 buckets of 10 MB over 2 devices at 1 GB/s: 10 ms each; launched 50, 40, 30 ms before
    # the last; the stream is free again 20 ms before the last launch, the last takes 10 ms
    buckets = [Bucket(10**7, r) for r in (50.0, 40.0, 30.0, 0.0)]
    p = project_ddp(inputs(buckets), link(), 2)
    assert p.comm_ms == pytest.approx(40.0)
    assert p.exposed_ms == pytest.approx(10.0)  # only the last bucket's own all-reduce


def test_buckets_queue_on_one_stream():
    # three 100 ms all-reduces launched 10 ms apart: the last one waits for the other two
    buckets = [Bucket(10**8, r) for r in (20.0, 10.0, 0.0)]
    exposed, total = model.exposed_ms(tuple(buckets), 2, link())
    assert total == pytest.approx(300.0)
    assert exposed == pytest.approx(300.0 - 20.0)


def test_latency_dominates_small_buckets_at_scale():
    # 4 bytes over 1024 devices, α = 5 µs: 2·1023·5 µs = 10.23 ms, the bytes cost nothing
    ms = ring_all_reduce_ms(4, 1024, link(alpha=5e-6))
    assert ms == pytest.approx(10.23, rel=1e-3)
    assert ring_all_reduce_ms(4, 1, link(alpha=5e-6)) == 0.0


def test_every_preset_names_its_source():
    for preset in PRESETS.values():
        assert "http" in preset.source, preset.name
        assert preset.basis in ("measured", "datasheet × efficiency"), preset.name
        if preset.basis != "measured":
            assert "efficiency" in preset.source, preset.name


def test_a_custom_link_is_parsed_and_a_bad_one_refused_in_one_line():
    lab = custom("lab=12.5GB/s@5us", "--project-links")
    assert (lab.name, lab.beta_bytes_per_s, lab.alpha_s) == ("lab", 12.5 * GB, pytest.approx(5e-6))
    assert custom("100Gb/s@2ms", "--link").beta_bytes_per_s == pytest.approx(12.5 * GB)
    with pytest.raises(DpwiseError, match="--link 'fast' is not a link; give a preset") as err:
        links.check_names("--link", ("fast",))
    assert "\n" not in str(err.value)


def test_link_from_a_probe_takes_its_all_reduce_fit():
    probe = {
        "world_size": 2,
        "backend": "gloo",
        "device_type": "cpu",
        "run": "r1",
        "ops": {
            "all_reduce": {
                "points": [],
                "fit": {"alpha_s": 3e-5, "beta_bytes_per_s": 2.5e7, "worst_error": 0.04},
            }
        },
    }
    probed = link_from_probe(probe)
    assert (probed.name, probed.alpha_s, probed.beta_bytes_per_s) == ("probe", 3e-5, 2.5e7)
    assert "r1" in probed.source
    with pytest.raises(DpwiseError, match="no all-reduce fit"):
        link_from_probe({"ops": {"all_reduce": {"unsupported": "no"}}})


def _results(buckets=({"bytes": 2_000_000, "ready_ms": 0.0},), world=2, device_type="cpu"):
    comm = {
        "step_ms": 20.0,
        "step_ms_without_sync": 10.0,
        "exposed_ms": 10.0,
        "gradient_bytes": 2_000_000,
        "buckets": list(buckets),
    }
    return {
        "schema": 1,
        "workload": {"batch_size": 64},
        "environment": {"device_type": device_type},
        "runs": [
            {"id": "single", "strategy": "single", "world_size": 1},
            {"id": f"ddp-{world}", "strategy": "ddp", "world_size": world, "communication": comm},
        ],
    }


def test_the_section_projects_every_link_within_its_reach():
    probe = {
        "world_size": 2,
        "backend": "gloo",
        "device_type": "cpu",
        "run": "r",
        "ops": {"all_reduce": {"fit": {"alpha_s": 1e-5, "beta_bytes_per_s": 1e8}}},
    }
    s = section.build(_results(), ("probe", "nvlink4", "eth-1g"), (2, 8, 64), probe)
    assert s["status"] == "projected"
    assert [x["link"] for x in s["series"]] == ["probe", "nvlink4", "eth-1g"]
    nvlink = s["series"][1]
    assert [p["devices"] for p in nvlink["ddp"]] == [2, 8]  # one node
    assert "64" in nvlink["not_projected"]
    eth = s["series"][2]["ddp"]
    assert eth[0]["compute_ms"] == 10.0 and eth[0]["samples_per_s"] == pytest.approx(
        2 * 32 / eth[0]["step_ms"] * 1e3
    )
    assert "pass-through" in s["dp"]
    # over the probe at the measured 2 devices: 2·α + 1/1 · 2 MB / 100 MB/s = 20.02 ms exposed
    check = s["check"]
    assert check["projected_step_ms"] == pytest.approx(30.02)
    assert check["error"] == pytest.approx((30.02 - 20.0) / 20.0)
    assert any("flat ring" in a for a in s["assumptions"])


def test_the_section_says_why_it_is_absent():
    s = section.build(_results(world=1), ("eth-1g",))
    assert s["status"] == "absent" and "no ddp run at 2 or more" in s["reason"]
    old = _results(buckets=())
    assert "no gradient buckets" in section.build(old, ("eth-1g",))["reason"]


def _sample_with_projection(tmp_path):
    results = json.loads((FIXTURES / "results_sample.json").read_text())
    ddp = next(r for r in results["runs"] if r["id"] == "ddp-2")
    ddp["communication"]["buckets"] = [{"bytes": 2_070_568, "ready_ms": 0.0}]
    results["projection"] = section.build(results, ("nvlink4", "ib-ndr", "eth-1g"))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(results))
    return path


def test_advise_from_results_cites_the_projection(tmp_path, capsys):
    path = _sample_with_projection(tmp_path)
    assert (
        main(["advise", "--json", "--from", str(path), "--link", "eth-1g", "--devices", "64"]) == 0
    )
    answer = json.loads(capsys.readouterr().out)
    cited = [r for r in answer["reasons"] if r.startswith("at 64 devices over 1 Gb/s Ethernet")]
    assert len(cited) == 1 and "ddp keeps" in cited[0] and "projection from ddp-2" in cited[0]
    (point,) = answer["projection"]["points"]
    assert (point["link"], point["devices"]) == ("eth-1g", 64)
    assert f"{point['efficiency']:.0%} efficiency" in cited[0]
    # by default: the fastest and the slowest link that reach 64 devices (nvlink4 does not)
    assert main(["advise", "--from", str(path)]) == 0
    text = capsys.readouterr().out
    assert "at 64 devices over InfiniBand NDR" in text and "at 64 devices over 1 Gb/s" in text


def test_advise_from_results_without_a_projection_says_so(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text((FIXTURES / "results_sample.json").read_text())
    assert main(["advise", "--from", str(path)]) == 0
    assert "no scaling projection in these results" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["advise", "--from", "R", "--link", "fast"], "--link 'fast' is not a link"),
        (["advise", "--from", "R", "--devices", "1"], "--devices must be at least 2"),
        (["advise", "--link", "eth-1g"], "give --from RESULTS_JSON too"),
        (["advise", "--from", "R", "--link", "nvlink4"], "within one node (8 devices at most)"),
        (["compare", "--project-links", "nvlink4,10Gb/s"], "'10Gb/s' is not a link"),
        (["compare", "--project-devices", "0,8"], "--project-devices 0,8: give device counts"),
    ],
)
def test_bad_projection_options_are_one_line_exit_2(args, message, tmp_path, capsys):
    path = _sample_with_projection(tmp_path)
    args = [str(path) if a == "R" else a for a in args]
    out = tmp_path / "never"
    assert main([*args, *(["--out", str(out)] if args[0] == "compare" else [])]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert not out.exists()


def test_fsdp_is_projected_with_no_overlap():
    # all-gathers of 2 GB and reduce-scatters of 1 GB (unsharded) over 2 devices at 1 GB/s:
    # (n−1)/n of each, 1000 + 500 ms, all exposed; each op adds (n−1)·α
    sharded = model.Sharded(
        run="fsdp-2", gathered_bytes=2e9, gathers=4, scattered_bytes=1e9, scatters=2
    )
    base = inputs([Bucket(10**6, 0.0)])
    p = model.project_fsdp(replace(base, sharded=sharded), link(alpha=1e-3), 2)
    assert p.exposed_ms == pytest.approx(1500.0 + 6 * 1.0)
    assert p.step_ms == pytest.approx(100.0 + 1506.0)
    assert model.project_fsdp(base, link(), 2) is None


def _event(name, start, us, shapes):
    return SimpleNamespace(
        name=name,
        device_type=DeviceType.CPU,
        time_range=SimpleNamespace(start=start, end=start + us, elapsed_us=lambda: us),
        input_shapes=shapes,
    )


def test_buckets_are_read_from_the_launches_inside_each_step():
    # two steps launch 3 buckets (elements 10, 20, 30) at 10, 40, 50 µs and 110, 150, 160 µs;
    # a third step where DDP rebuilt its buckets launches one: left out of the median
    events = [_event(profile.STEP_MARK, s, 90, []) for s in (0, 100, 200)]
    for start in ((10, 40, 50), (110, 150, 160), (210,)):
        for t, elements in zip(start, (10, 20, 30), strict=False):
            events += [
                _event("c10d::allreduce_", t, 1, [[], []]),
                _event("gloo:all_reduce", t + 1, 5, [[elements]]),
            ]
    windows = profile.step_windows(events, skip=0)
    got = step_buckets(events, windows, element_size=4)
    assert [b["bytes"] for b in got] == [40, 80, 120]
    # ms before the last launch: medians of (40, 10, 0) µs and (50, 10, 0) µs
    assert [b["ready_ms"] for b in got] == pytest.approx([0.045, 0.010, 0.0])
    assert step_buckets([], [], 4) == []
