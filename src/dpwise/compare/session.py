"""`dpwise compare` end to end: validate, run, assemble, write the report, print the verdict."""

from __future__ import annotations

import shutil
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from dpwise.compare import publish
from dpwise.compare.analysis import assemble
from dpwise.compare.matrix import RunSpec, build_matrix
from dpwise.compare.runner import run_all
from dpwise.compare.settings import CompareConfig
from dpwise.errors import DpwiseError
from dpwise.infra import outowner
from dpwise.infra.hardware import Hardware
from dpwise.infra.outlock import first_missing, locked
from dpwise.report.files import write_reports
from dpwise.report.terminal import (
    CompareProgress,
    checks_table,
    projection_line,
    summary_table,
    verdict_lines,
)
from dpwise.results.document import Results
from dpwise.train import outputs, preflight
from dpwise.train.inspection import Inspection
from dpwise.workload.spec import workload_for


def run_compare(cfg: CompareConfig, command: str) -> int:
    """Returns the exit code: 0 when no check fails, 1 when one does."""
    started = time.perf_counter()
    hw = Hardware.detect()
    specs = build_matrix(cfg, hw)  # bad sizes fail here, before anything runs or is written
    seen = Inspection(workload_for(cfg).validate(), cfg.seed)  # the model, built once
    check_runs(specs, seen, cfg.optimizer)
    if seen.probe.unused:  # random layers, unused parameters
        cfg = replace(cfg, find_unused_parameters=True)  # DDP stops without it
    outputs.check_writable(cfg.out)
    outowner.check(cfg.out, outowner.COMPARE)  # tune's or train's results are not replaced
    created = first_missing(cfg.out)
    try:
        with locked(cfg.out):  # one compare (or train) writes an --out at a time
            results, html = _measure_and_report(cfg, hw, specs, seen, command, started)
    except BaseException:
        # a user mistake found by a run, a crash, Ctrl-C: no half-written report folder, but what
        # was measured (the runs swapped into --out) is never removed by this failure
        if created is not None and not publish.holds_runs(cfg.out):
            shutil.rmtree(created, ignore_errors=True)
        raise
    if not cfg.quiet:
        _print_summary(results, html, cfg)
    return 1 if any(c.status == "fail" for c in results.checks) else 0


def check_runs(specs: list[RunSpec], seen: Inspection, optimizer: str) -> None:
    """Every strategy of the matrix can run the model (preflight.check_fit, on the one
    meta-device model, with the layers the probe found used in some steps only), or the
    comparison is refused in one line before anything runs, naming the strategies that can."""
    refused = {}
    varying = seen.varying
    for spec in specs:
        if spec.strategy in refused:
            continue
        try:
            preflight.check_fit(seen.meta, spec.strategy, spec.device_type, optimizer, varying)
        except DpwiseError as exc:
            refused[spec.strategy] = str(exc)
    if refused:
        able = [s.strategy for s in specs if s.strategy not in refused]
        hint = f"; compare the others with --strategies {','.join(dict.fromkeys(able))}"
        raise DpwiseError(next(iter(refused.values())) + (hint if able else ""))


def _measure_and_report(
    cfg: CompareConfig,
    hw: Hardware,
    specs: list[RunSpec],
    seen: Inspection,
    command: str,
    started: float,
) -> tuple[Results, Path]:
    err = Console(stderr=True)
    units = len(specs) * (cfg.repeats + 1)
    stage = publish.staging(cfg.out)  # the runs write here; the old report stays valid
    try:
        staged = replace(cfg, out=stage)
        # a bar only on a terminal: in a log its last state would sit above any error line
        shown = not cfg.quiet and err.is_terminal
        with CompareProgress(units, err, enabled=shown) as progress:
            runs = run_all(staged, specs, progress.on_event)
        measured = time.perf_counter()
        results = assemble(staged, hw, runs, command, seen)
        publish.swap_in(stage, cfg.out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    try:
        # the measurements first: a report that cannot be written (a full disk) loses nothing
        outputs.write_json(results.to_json(), cfg.out / "results.json")
        results, written = write_reports(results, cfg.out)  # now naming the plots written
        timing = {
            "wall_seconds": time.perf_counter() - started,
            "runs_seconds": measured - started,
            "training_seconds": sum(r.training_seconds or 0.0 for r in runs),
            "report_seconds": time.perf_counter() - measured,
        }
        results = replace(results, timing=timing)
        outputs.write_json(results.to_json(), cfg.out / "results.json")
    except DpwiseError as exc:
        raise DpwiseError(f"{exc}; {publish.kept(cfg.out)}") from None
    return results, written["html"]


def _print_summary(results: Results, html: Path, cfg: CompareConfig) -> None:
    out = Console()
    out.print(summary_table(results))
    out.print(checks_table(results))
    for line in verdict_lines(results):
        out.print(line)
    if (projected := projection_line(results)) is not None:
        out.print(projected)
    out.print(f"report: {html}  (also {cfg.out / 'report.md'}, {cfg.out / 'results.json'})")
