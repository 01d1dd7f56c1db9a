"""results.json (schema 1) read into compare's typed records and written back: no key is lost."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from compare_fakes import comm, run
from dpwise.compare.publish import _named_by
from dpwise.results.document import Results
from dpwise.results.records import Run

SAMPLE = Path(__file__).parent / "fixtures" / "results_sample.json"
# every key compare has written on a run since schema 1 (ddp_options: on ddp runs only)
RUN_KEYS = {
    "id", "label", "strategy", "world_size", "backend", "devices", "threads_per_process", "notes",
    "epoch_seconds", "samples_per_s", "samples_per_epoch", "training_seconds", "losses",
    "final_state", "memory", "communication", "sync_points_per_step", "trace", "pids", "diverged",
    "wall_seconds", "speedup_vs_single", "max_param_diff_vs_single", "link_probe",
    "other_cpu_share", "max_buffer_diff_vs_single", "diff_vs_single",
}  # fmt: skip
TOP_KEYS = {
    "schema", "dpwise_version", "created", "command", "workload", "environment", "runs",
    "diagnosis", "checks", "recommendation", "claims", "plots",
}  # fmt: skip


def kept(old: Any, new: Any, where: str = "") -> list[str]:
    """Where ``new`` lost or changed something ``old`` had (new keys are allowed)."""
    if isinstance(old, dict):
        if not isinstance(new, dict):
            return [where]
        return [p for k, v in old.items() for p in kept(v, new.get(k, KeyError), f"{where}.{k}")]
    if isinstance(old, list):
        if not isinstance(new, list) or len(new) != len(old):
            return [where]
        return [
            p
            for i, (a, b) in enumerate(zip(old, new, strict=True))
            for p in kept(a, b, f"{where}[{i}]")
        ]
    return [] if old == new else [where]


def test_an_older_results_json_loads_and_writes_back_every_key_it_had():
    old = json.loads(SAMPLE.read_text())
    assert "pids" not in old["runs"][0]  # written before several keys existed
    results = Results.from_json(old)
    assert [r.id for r in results.runs] == [r["id"] for r in old["runs"]]
    assert results.runs[2].memory.busiest == max(
        d["peak_bytes"] for d in old["runs"][2]["memory"]["per_device"]
    )
    assert kept(old, results.to_json()) == []


def test_a_run_writes_every_key_of_schema_1_and_reads_back_equal():
    ddp = run("ddp-2", 900, comm=comm(0.2))
    written = ddp.to_json()
    assert set(written) == RUN_KEYS  # ddp_options only once compare marked the run
    assert Run.from_json(json.loads(json.dumps(written))) == ddp
    results = Results(runs=(ddp,), timing={"wall_seconds": 1.0})
    assert set(results.to_json()) == TOP_KEYS | {"timing"}


def test_a_link_probe_reads_back_on_its_run_and_at_the_top():
    probe = {"world_size": 2, "backend": "gloo", "ops": {"all_reduce": {"points": []}}}
    ddp = replace(run("ddp-2", 900, comm=comm(0.2)), link_probe=probe)
    results = Results(runs=(ddp,), link_probe={**probe, "run": "ddp-2"})
    again = Results.from_json(json.loads(json.dumps(results.to_json())))
    assert again.runs == results.runs and again.link_probe == results.link_probe
    assert "link_probe" not in Results(runs=(ddp,)).to_json()  # no probe, no key


def test_malformed_parts_take_their_defaults():
    results = Results.from_json({"runs": [{"id": "single", "memory": None, "losses": None}, 3]})
    (single,) = results.runs
    assert (single.label, single.world_size, single.memory.busiest, single.losses) == (
        "single",
        1,
        0,
        (),
    )
    assert results.plots is None and results.checks == () and results.recommendation == {}


def test_the_files_an_older_report_named_are_found_for_removal(tmp_path):
    old = json.loads(SAMPLE.read_text())
    old["runs"][0]["final_state"] = "runs/single/final.pt"
    (tmp_path / "results.json").write_text(json.dumps(old))
    names = _named_by(tmp_path / "results.json")
    assert "runs/single/final.pt" in names
    assert {r["trace"] for r in old["runs"] if r.get("trace")} <= set(names)
    assert set(old["plots"].values()) <= set(names)


BEFORE_ROOMS = Path(__file__).parent / "fixtures" / "results_before_rooms.json"


def test_a_results_json_written_before_the_rooms_moved_loads_renders_and_advises(tmp_path, capsys):
    """A file `dpwise compare` wrote at 4493df2, before its modules moved into rooms (only its
    --out in the command line was renamed): it reads into the records, writes back every key it
    had, renders as a report, and `advise --from` answers from it."""
    from dpwise.cli import main
    from dpwise.report.files import write_reports

    old = json.loads(BEFORE_ROOMS.read_text())
    assert {"link_probe", "projection", "diagnosis"} <= set(old)
    results = Results.from_json(old)
    assert kept(old, results.to_json()) == []
    assert [r.id for r in results.runs] == ["single", "dp", "ddp-1", "ddp-2"]
    _, files = write_reports(results, tmp_path)
    assert "ddp × 2" in files["markdown"].read_text() and files["html"].is_file()
    assert main(["advise", "--from", str(BEFORE_ROOMS), "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["strategy"] == "single" and answer["measured"]
