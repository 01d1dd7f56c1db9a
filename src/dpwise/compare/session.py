"""`dpwise compare` end to end: validate, run, assemble, write the report, print the verdict."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
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
    results, html = written(cfg.out, lambda: _measure_and_report(cfg, hw, specs, seen, command,
                                                                 started))  # fmt: skip
    if not cfg.quiet:
        _print_summary(results, html, cfg)
    return 1 if any(c.status == "fail" for c in results.checks) else 0


def run_scripts(cfg: CompareConfig, given: list[str], command: str) -> int:
    """`compare --script`: the user's scripts, unedited, through the same checks and report;
    returns the exit code as run_compare does."""
    from dpwise.compare import scripted, scripted_analysis
    from dpwise.userscript.command import parse

    started = time.perf_counter()
    specs = scripted.matrix([parse(g) for g in given], cfg.world_sizes or (1, 2))
    steps = cfg.max_steps or scripted.DEFAULT_STEPS
    settings = {"steps": steps, "repeats": cfg.repeats, "seed": cfg.seed,
                "tolerance": cfg.tolerance}  # fmt: skip

    def measured(stage: Path) -> tuple[Results, float]:
        err = Console(stderr=True)
        units = len(specs) * cfg.repeats
        with CompareProgress(units, err, enabled=not cfg.quiet and err.is_terminal) as progress:
            runs = scripted.measure(specs, stage, cfg.repeats, steps, cfg.timeout, cfg.seed,
                                    cfg.profile_steps, progress.on_event)  # fmt: skip
        ended = time.perf_counter()
        found = scripted.causes(stage, runs[0])
        return scripted_analysis.assemble(stage, runs, specs, found, settings, command), ended

    results, html = written(cfg.out, lambda: publish_measured(cfg.out, measured, started))
    if not cfg.quiet:
        _print_summary(results, html, cfg)
    return 1 if any(c.status == "fail" for c in results.checks) else 0


def written(out: Path, make: Callable[[], tuple[Results, Path]]) -> tuple[Results, Path]:
    """``make`` (which measures and writes the report) with ``out`` checked and locked; a failure
    leaves no half-written report folder, but never removes runs already swapped in."""
    outputs.check_writable(out)
    outowner.check(out, outowner.COMPARE)  # tune's or train's results are not replaced
    created = first_missing(out)
    try:
        with locked(out):  # one compare (or train) writes an --out at a time
            return make()
    except BaseException:
        # a user mistake found by a run, a crash, Ctrl-C: no half-written report folder, but what
        # was measured (the runs swapped into --out) is never removed by this failure
        if created is not None and not publish.holds_runs(out):
            shutil.rmtree(created, ignore_errors=True)
        raise


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
    def measured(stage: Path) -> tuple[Results, float]:
        err = Console(stderr=True)
        units = len(specs) * (cfg.repeats + 1)
        staged = replace(cfg, out=stage)
        # a bar only on a terminal: in a log its last state would sit above any error line
        shown = not cfg.quiet and err.is_terminal
        with CompareProgress(units, err, enabled=shown) as progress:
            runs = run_all(staged, specs, progress.on_event)
        ended = time.perf_counter()
        return assemble(staged, hw, runs, command, seen), ended

    return publish_measured(cfg.out, measured, started)


def publish_measured(
    out: Path, measured: Callable[[Path], tuple[Results, float]], started: float
) -> tuple[Results, Path]:
    """``measured`` runs in a staging folder (the old report stays valid meanwhile) and returns
    the results and when its runs ended; its runs are swapped into ``out``, then results.json and
    the reports written."""
    stage = publish.staging(out)  # the runs write here; the old report stays valid
    try:
        results, ended = measured(stage)
        publish.swap_in(stage, out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    try:
        # the measurements first: a report that cannot be written (a full disk) loses nothing
        outputs.write_json(results.to_json(), out / "results.json")
        results, written = write_reports(results, out)  # now naming the plots written
        timing = {
            "wall_seconds": time.perf_counter() - started,
            "runs_seconds": ended - started,
            "training_seconds": sum(r.training_seconds or 0.0 for r in results.runs),
            "report_seconds": time.perf_counter() - ended,
        }
        results = replace(results, timing=timing)
        outputs.write_json(results.to_json(), out / "results.json")
    except DpwiseError as exc:
        raise DpwiseError(f"{exc}; {publish.kept(out)}") from None
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
