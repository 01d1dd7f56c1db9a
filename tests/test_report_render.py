"""The report renderers on the sample results.json: plots, report.md, report.html."""

from __future__ import annotations

import copy
import json
import re
import shutil
import struct
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from dpwise.report.files import write_reports
from dpwise.report.html import render_html
from dpwise.report.markdown import render_markdown
from dpwise.report.plots import memory_title, write_plots
from dpwise.results.document import Results
from dpwise.results.records import Memory, Run

SAMPLE = Path(__file__).parent / "fixtures" / "results_sample.json"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
ALL_PLOTS = {"throughput", "memory", "loss", "communication"}


@pytest.fixture
def results(tmp_path: Path) -> dict[str, Any]:
    """A private copy of the sample, loaded from tmp_path (tests may change it freely)."""
    copied = tmp_path / "results.json"
    shutil.copy(SAMPLE, copied)
    return json.loads(copied.read_text())


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The unchanged sample, rendered once: plots, Markdown and HTML."""
    out = tmp_path_factory.mktemp("sample")
    shutil.copy(SAMPLE, out / "results.json")
    results = json.loads((out / "results.json").read_text())
    plots = write_plots(doc(results), out)
    results["plots"] = plots
    md, html = render_markdown(doc(results)), render_html(doc(results), out)
    return SimpleNamespace(results=results, out=out, plots=plots, md=md, html=html)


def doc(results: dict[str, Any]) -> Results:
    """The report's input: a results.json's content read as compare's typed document."""
    return Results.from_json(results)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def md_section(md: str, heading: str) -> str:
    """The text under ``heading`` up to the next heading of any level."""
    start = md.index(heading + "\n") + len(heading)
    following = re.search(r"^#{1,3} ", md[start:], flags=re.M)
    return md[start : start + following.start()] if following else md[start:]


def table_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("|")]


def cells(line: str) -> list[str]:
    """A Markdown table row split on unescaped pipes."""
    return re.split(r"(?<!\\)\|", line.strip())[1:-1]


# --- plots ------------------------------------------------------------------------------


def test_every_plot_is_a_valid_png(sample):
    assert set(sample.plots) == ALL_PLOTS
    for name in sample.plots.values():
        width, height = png_size(sample.out / name)
        assert width > 100 and height > 100
    leftovers = [p.name for p in sample.out.iterdir() if p.name.startswith(".")]
    assert not leftovers, "temporary files left"


def test_several_world_sizes_add_a_scaling_panel(results, tmp_path):
    plain = png_size(
        tmp_path / "plain" / write_plots(doc(results), tmp_path / "plain")["throughput"]
    )
    ddp4 = copy.deepcopy(results["runs"][2])
    ddp4.update(id="ddp-4", label="ddp × 4", world_size=4, samples_per_s={"median": 9e4})
    results["runs"].append(ddp4)
    scaled = png_size(
        tmp_path / "scaled" / write_plots(doc(results), tmp_path / "scaled")["throughput"]
    )
    assert scaled[0] > plain[0] + 300, "no second panel for samples/s vs world size"


def test_memory_title_names_the_kind():
    def runs(kind: str) -> list[Run]:
        return [
            Run(
                id="single",
                label="single",
                strategy="single",
                world_size=1,
                memory=Memory(kind=kind),
            )
        ]

    assert memory_title(runs("cpu_live_tensors")) == "Peak live tensor memory per process"
    assert memory_title(runs("cuda_max_memory_allocated")) == (
        "torch.cuda.max_memory_allocated per GPU"
    )


# --- Markdown ---------------------------------------------------------------------------


def test_markdown_puts_the_verdict_first(sample):
    md, results = sample.md, sample.results
    headline = results["recommendation"]["headline"]
    assert md.startswith("# dpwise compare report\n")
    assert md.index(f"**{headline}**") < md.index("### ")
    order = ["## Verdict", "## The guide's claims, checked", "## Checks", "### convergence"]
    order += ["## Runs", "## Environment", "## Workload", "dpwise compare --epochs 5"]
    positions = [md.index(marker) for marker in order]
    assert positions == sorted(positions)
    for reason in results["recommendation"]["reasons"]:
        assert f"- {reason}\n" in md_section(md, "## Verdict")


def test_markdown_has_every_check_and_claim(sample):
    md, results = sample.md, sample.results
    assert len(results["checks"]) == 5
    for check in results["checks"]:
        assert f"\n### {check['name']}\n" in md
    for claim in results["claims"]:
        assert claim["claim"] in md and claim["verdict"] in md_section(
            md, "## The guide's claims, checked"
        )
    assert "✅ pass" in md and "⚠️ warn" in md and "⏭️ skip" in md


def test_markdown_tables_have_one_line_per_row(results, tmp_path):
    results["checks"][2]["table"]["rows"].append(["a|b", "x\ny", "1", "2", "3"])
    md = render_markdown(doc(results))
    for check in results["checks"]:
        lines = table_lines(md_section(md, f"### {check['name']}"))
        columns = len(check["table"]["columns"])
        assert len(lines) - 2 == len(check["table"]["rows"]), check["name"]
        assert all(len(cells(line)) == columns for line in lines), check["name"]


def test_markdown_escapes_pipes(results, tmp_path):
    results["checks"][0]["summary"] = "left | right"
    md = render_markdown(doc(results))
    assert "| run | max \\|Δparam\\| vs single | final loss |" in md
    assert "left \\| right" in md_section(md, "## Checks")


def test_markdown_links_the_plots(sample):
    links = re.findall(r"!\[[^\]]+\]\(([^)]+)\)", sample.md)
    assert sorted(links) == sorted(c["plot"] for c in sample.results["checks"] if c["plot"])
    assert all((sample.out / link).is_file() for link in links)


def test_markdown_marks_a_failed_check(results):
    results["checks"][0]["status"] = "fail"
    assert "| convergence | ❌ fail |" in render_markdown(doc(results))


# --- HTML -------------------------------------------------------------------------------


def test_html_is_self_contained(sample):
    html = sample.html
    assert "http://" not in html.lower() and "https://" not in html.lower()
    assert "<script" not in html.lower() and "<link" not in html.lower()
    sources = re.findall(r"""\bsrc\s*=\s*["']?([^"'\s>]*)""", html)
    assert sources and all(src.startswith("data:image/png;base64,") for src in sources)
    links = re.findall(r"""\bhref\s*=\s*["']?([^"'\s>]*)""", html)
    assert links and all(link.startswith("#") for link in links)
    assert "url(" not in html


def test_html_embeds_one_image_per_referenced_plot(sample):
    html = sample.html
    referenced = {c["plot"] for c in sample.results["checks"] if c["plot"]}
    assert html.count("<img") == len(referenced) == 4
    alts = re.findall(r'<img [^>]*alt="([^"]*)"', html)
    assert len(alts) == 4 and all(len(alt) > 20 for alt in alts)


def test_plots_no_check_refers_to_are_still_shown(results, tmp_path):
    results["checks"][2]["plot"] = None  # speed: throughput.png
    _, paths = write_reports(doc(results), tmp_path)
    md = paths["markdown"].read_text()
    assert "](throughput.png)" in md_section(md, "## More plots")
    assert "](throughput.png)" not in md_section(md, "### speed")
    assert paths["html"].read_text().count("<img") == 4


def test_html_verdict_comes_first_and_checks_have_sections(sample):
    html, results = sample.html, sample.results
    verdict = html.index('id="verdict"')
    assert verdict < html.index(results["recommendation"]["headline"]) < html.index('id="check-')
    for check in results["checks"]:
        assert f'id="check-{check["name"]}"' in html
    for claim in results["claims"]:
        assert claim["claim"] in html
    assert html.index('id="check-') < html.index('id="runs"') < html.index('id="workload"')


def test_html_escapes_text(results, tmp_path):
    results["checks"][0]["summary"] = "<script>alert('x')</script> & <b>bold</b>"
    results["recommendation"]["reasons"].append('a "quoted" <i>reason</i>')
    html = render_html(doc(results), tmp_path)
    assert "<script>" not in html and "<b>bold</b>" not in html and "<i>" not in html
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "a &#34;quoted&#34; &lt;i&gt;reason&lt;/i&gt;" in html


# --- robustness and files ---------------------------------------------------------------


def test_no_communication_data_means_no_communication_plot(results, tmp_path):
    for run in results["runs"]:
        run["communication"] = None
    written, paths = write_reports(doc(results), tmp_path)
    assert set(written.plots) == ALL_PLOTS - {"communication"}
    assert "communication" not in paths and not (tmp_path / "communication.png").exists()
    assert "](communication.png)" not in paths["markdown"].read_text()
    assert paths["html"].read_text().count("<img") == 3


def test_a_single_run_renders(results, tmp_path):
    results["runs"] = results["runs"][:1]
    written, paths = write_reports(doc(results), tmp_path)
    assert set(written.plots) == {"throughput", "memory", "loss"}
    for key in written.plots:
        png_size(paths[key])
    assert "| single | 1 | — | cpu | 2 | — |" in paths["markdown"].read_text()


def test_missing_values_do_not_crash(results, tmp_path):
    run = results["runs"][2]
    run["samples_per_s"] = {"median": 30000.0}
    run["losses"] = []
    run["memory"] = {"kind": None, "per_device": [{"rank": 0, "peak_bytes": None}]}
    run["communication"] = {"step_ms": 8.0, "exposed_ms": 1.0}
    results["runs"][0].update(samples_per_s=None, memory=None, losses=None, label=None)
    results["checks"][1].update(table=None, plot=None, explanation=None)
    results["recommendation"] = {}
    results["claims"] = []
    written, paths = write_reports(doc(results), tmp_path)
    assert set(written.plots) == ALL_PLOTS
    md = paths["markdown"].read_text()
    assert "No claims were checked." in md and "No recommendation was made." in md


def test_empty_results_render(tmp_path):
    _, paths = write_reports(doc({}), tmp_path)
    assert set(paths) == {"markdown", "html"}
    assert 'id="verdict"' in paths["html"].read_text()


def test_write_reports_writes_and_returns_every_file(results, tmp_path):
    out = tmp_path / "report"
    written, paths = write_reports(doc(results), out)
    assert set(paths) == {"markdown", "html"} | ALL_PLOTS
    assert written.plots == {key: f"{key}.png" for key in ALL_PLOTS}
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths.values())
    assert paths["markdown"].read_text() == render_markdown(written)
    assert paths["html"].read_text() == render_html(written, out)


def test_an_inconclusive_verdict_names_single_a_safe_default_not_a_recommendation(
    results, tmp_path
):
    rec = results["recommendation"]
    rec.update(
        status="inconclusive",
        inconclusive_reason="the interval crosses the 5% margin",
        strategy="single",
        world_size=1,
        headline="Inconclusive on this machine: keep a single process until a quieter run decides",
    )
    md, html = render_markdown(doc(results)), render_html(doc(results), tmp_path)
    for text in (md, html):
        assert "Safe default until a run decides" in text and "Recommended:" not in text


# --- the link probe -----------------------------------------------------------------------


def _link_probe() -> dict[str, Any]:
    from dpwise.link import fit as f

    sizes = f.sizes(8, 2**20, 2)
    seconds = [f.model_seconds("all_reduce", 2, s, 2e-4, 1e9) for s in sizes]
    points = [f.point("all_reduce", 2, s, t) for s, t in zip(sizes, seconds, strict=True)]
    part = {"points": points, "fit": f.fit("all_reduce", 2, sizes, seconds)}
    return {
        "world_size": 2,
        "backend": "gloo",
        "device_type": "cpu",
        "ops": {"all_reduce": part},
        "run": "ddp-2",
    }


def test_a_link_probe_gets_its_section_table_and_plot(results, tmp_path):
    results["link_probe"] = _link_probe()
    written, paths = write_reports(doc(results), tmp_path)
    assert written.plots["link"] == "link.png"
    width, height = png_size(tmp_path / "link.png")
    assert width > 100 and height > 100
    md = (tmp_path / "report.md").read_text()
    section = md_section(md, "## Link probe")
    assert "Measured on this machine's gloo link between 2 processes (run ddp-2" in section
    assert "α = 200.0 µs, β = 1.000 GB/s (8.00 Gbit/s)" in section
    rows = table_lines(section)[2:]
    assert len(rows) == len(_link_probe()["ops"]["all_reduce"]["points"])
    assert cells(rows[-1])[1].strip() == "1.00 MiB"
    assert "![busbw and algbw by message size" in section and "(link.png)" in section
    assert md.count("(link.png)") == 1  # not repeated under "More plots"
    html = (tmp_path / "report.html").read_text()
    assert 'id="link-probe"' in html and html.count("data:image/png;base64,") == len(paths) - 2


def test_without_a_link_probe_there_is_no_section(sample):
    assert "Link probe" not in sample.md and 'id="link-probe"' not in sample.html
    assert not (sample.out / "link.png").exists()
