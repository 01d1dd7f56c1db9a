"""The link probe's arithmetic, fit, settings and text: pure functions, no processes."""

import math

import pytest

from dpwise.errors import DpwiseError
from dpwise.link import fit as f
from dpwise.link.settings import ProbeLinkConfig, parse_bytes, parse_ops
from dpwise.link.text import link_lines
from dpwise.report.link_view import link_view


@pytest.mark.parametrize(
    ("op", "n", "factor"),
    [
        ("all_reduce", 2, 1.0),
        ("all_reduce", 4, 1.5),
        ("all_reduce", 8, 1.75),
        ("all_gather", 4, 0.75),
        ("reduce_scatter", 2, 0.5),
    ],
)
def test_busbw_is_algbw_times_nccl_tests_factor(op, n, factor):
    p = f.point(op, n, 1_000_000, 1e-3)
    assert p["algbw_bytes_per_s"] == pytest.approx(1e9)
    assert p["busbw_bytes_per_s"] == pytest.approx(1e9 * factor)
    assert p["bytes"] == 1_000_000 and p["seconds"] == 1e-3


def test_ring_model_time():
    # all_reduce on 4: 6 latency steps and 1.5 × S / β
    assert f.model_seconds("all_reduce", 4, 1e9, 1e-5, 1e10) == pytest.approx(6e-5 + 0.15)
    assert f.model_seconds("all_gather", 4, 1e9, 1e-5, 1e10) == pytest.approx(3e-5 + 0.075)


@pytest.mark.parametrize("op", f.OPS)
@pytest.mark.parametrize("n", [2, 3, 8])
@pytest.mark.parametrize(("alpha", "beta"), [(25e-6, 12.5e9), (300e-6, 25e6), (2e-6, 400e9)])
def test_the_fit_recovers_a_known_alpha_and_beta(op, n, alpha, beta):
    sizes = f.sizes(8, 64 * 2**20, n)
    times = [f.model_seconds(op, n, s, alpha, beta) for s in sizes]
    got = f.fit(op, n, sizes, times)
    assert got["alpha_s"] == pytest.approx(alpha, rel=0.01)
    assert got["beta_bytes_per_s"] == pytest.approx(beta, rel=0.01)
    assert got["worst_error"] < 0.01


def test_the_fit_recovers_them_through_noise_and_reports_its_worst_error():
    sizes = f.sizes(8, 2**26, 2)
    noise = [1 + 0.05 * (-1) ** i for i in range(len(sizes))]  # ±5 %, alternating
    times = [
        f.model_seconds("all_reduce", 2, s, 50e-6, 1e9) * e
        for s, e in zip(sizes, noise, strict=True)
    ]
    got = f.fit("all_reduce", 2, sizes, times)
    assert got["alpha_s"] == pytest.approx(50e-6, rel=0.06)
    assert got["beta_bytes_per_s"] == pytest.approx(1e9, rel=0.06)
    assert 0.04 < got["worst_error"] < 0.12


def test_a_bandwidth_only_link_fits_zero_latency():
    sizes = [2**k for k in range(10, 27, 2)]
    times = [s / 1e9 * (1.01 if i % 2 else 0.99) for i, s in enumerate(sizes)]  # busbw 1 GB/s
    got = f.fit("all_reduce", 2, sizes, times)
    assert got["alpha_s"] >= 0
    assert got["beta_bytes_per_s"] == pytest.approx(1e9, rel=0.02)


def test_sizes_grow_by_four_up_to_the_maximum_in_whole_elements_per_process():
    assert f.sizes(8, 2048, 2) == [8, 32, 128, 512, 2048]
    got = f.sizes(8, 1000, 3)
    assert got[-1] >= 1000 and all(s % 12 == 0 for s in got)
    assert got == sorted(set(got))


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("64MiB", 64 * 2**20), ("1GB", 10**9), ("512 KiB", 512 * 1024), ("65536", 65536)],
)
def test_sizes_parse_with_units(raw, expected):
    assert parse_bytes(raw, "--max-bytes") == expected


@pytest.mark.parametrize("raw", ["64XB", "lots", "-3", ""])
def test_a_bad_size_is_one_line(raw):
    with pytest.raises(
        DpwiseError, match=r"--max-bytes .* is not a size; .* e\.g\. --max-bytes 64MiB"
    ):
        parse_bytes(raw, "--max-bytes")


def test_ops_parse_and_refuse_unknown_names():
    assert parse_ops("all_reduce, all_gather", "--ops") == ("all_reduce", "all_gather")
    with pytest.raises(DpwiseError, match="unknown broadcast"):
        parse_ops("all_reduce,broadcast", "--ops")


def test_one_process_is_refused():
    with pytest.raises(DpwiseError, match="a link needs two ends"):
        ProbeLinkConfig(nproc=1)


def _probe():
    sizes = f.sizes(8, 2**20, 2)
    points = [
        f.point("all_reduce", 2, s, f.model_seconds("all_reduce", 2, s, 1e-4, 1e9)) for s in sizes
    ]
    return {
        "world_size": 2,
        "backend": "gloo",
        "device_type": "cpu",
        "hosts": ["a", "b"],
        "ops": {
            "all_reduce": {
                "points": points,
                "fit": f.fit("all_reduce", 2, sizes, [p["seconds"] for p in points]),
            },
            "reduce_scatter": {"unsupported": "gloo: no"},
        },
    }


def test_the_terminal_table_has_a_row_per_size_and_the_fit_in_human_units():
    lines = link_lines(_probe())
    assert lines[0] == "link probe: gloo between 2 processes (cpu) on a, b"
    row = next(line for line in lines if line.split()[:3] == ["1.00", "MiB", "1048576"])
    busbw = float(row.split()[-1])
    assert math.isclose(busbw, 2**20 / (2e-4 + 2**20 / 1e9) / 1e9, rel_tol=1e-3)
    assert any("α = 100.0 µs, β = 1.000 GB/s (8.00 Gbit/s)" in line for line in lines)
    assert "reduce_scatter: not measured (gloo: no)" in lines


def test_the_report_view_names_the_backend_and_processes():
    view = link_view({**_probe(), "run": "ddp-2"}, "link.png")
    assert view["caption"].startswith("Measured on this machine's gloo link between 2 processes")
    assert len(view["rows"]) == len(_probe()["ops"]["all_reduce"]["points"])
    assert view["plot"] == "link.png"
    assert link_view(None, None) is None
