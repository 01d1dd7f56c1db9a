"""`dpwise advise --from`: what dpwise compare measured, passed on with what it could not settle."""

from __future__ import annotations

import math
from typing import Any

from dpwise.advise.rules import Recommendation, Situation, decide, launch_commands
from dpwise.errors import DpwiseError
from dpwise.infra.units import sci, size
from dpwise.results.document import Results
from dpwise.results.records import Recommendation as Measured
from dpwise.results.records import Run
from dpwise.strategies import reference

RERUN = "a quieter machine or more repeats: run dpwise compare again, then dpwise advise --from"


def _diverged(run: Run) -> bool:
    if run.diverged:
        return True
    return any(v is None or not math.isfinite(float(v)) for v in run.losses)


def refuse_diverged(run: Run) -> None:
    """No recommendation of a run whose loss went non-finite: its speed says nothing."""
    if not _diverged(run):
        return
    found = run.diverged or {}
    where = f" at step {found['step']}" if found.get("step") else ""
    cause = f" (likely cause: {found['cause']})" if found.get("cause") else ""
    raise DpwiseError(
        f"--from: the compared run {run.label} diverged (its loss became "
        f"non-finite{where}{cause}), so dpwise recommends nothing from these results; fix the "
        "divergence and run dpwise compare again"
    )


def run_warnings(results: Results, run: Run) -> list[str]:
    """Why the measured run should not be trained as it is: its parameters left the
    single-process run's (the convergence check failed for it); and which other runs diverged."""
    out = [
        f"{other.label}'s loss diverged in the compared run (a non-finite value): it is never "
        "recommended; fix the divergence (learning rate, precision, data) before training it"
        for other in results.runs
        if other is not run and _diverged(other)
    ]
    tolerance = results.workload.get("tolerance")
    diff = run.max_param_diff_vs_single
    if run.id != reference() and tolerance is not None and diff is not None and diff > tolerance:
        out.append(
            f"{run.label} did not reproduce the single-process run: its parameters differ by "
            f"up to {sci(diff)} (tolerance {sci(tolerance)}); it trains a different model until "
            "the cause named in the convergence check is fixed"
        )
    return out


def _inconclusive(rec: Measured, s: Situation) -> Recommendation:
    answer = decide(s)
    why = rec.inconclusive_reason or "the measurements could not separate the runs"
    answer.reasons = [
        f"dpwise compare's measurements were inconclusive: {why}; this answer comes from the "
        "rules, not from the measurements",
        *answer.reasons,
    ]
    answer.changes = [*answer.changes, RERUN]
    answer.measurement_status = "inconclusive"
    answer.inconclusive_reason = why
    return answer


def from_results(document: dict[str, Any], s: Situation) -> Recommendation:
    """Measurements from `dpwise compare` (a results.json's content, schema 1, of any age) take
    precedence over every rule, unless they could not separate the runs (status "inconclusive";
    files without a status were conclusive)."""
    results = Results.from_json(document)
    rec = Measured.from_json(results.recommendation)
    best = results.run(rec.run) or results.runs[0]
    refuse_diverged(best)
    if rec.status == "inconclusive":
        answer = _inconclusive(rec, s)
        answer.warnings = run_warnings(results, best)
        return answer
    reasons = [
        "measured by dpwise compare: measurements take precedence over the rules",
        *rec.reasons,
        f"measured peak per device of {best.label}: {size(best.memory.busiest)}",
    ]
    world = 1 if rec.world_size is None else rec.world_size
    return Recommendation(
        rec.strategy,
        "measured-results",
        reasons,
        rec.runner_up,
        ["other hardware or another workload: run dpwise compare there"],
        launch_commands(rec.strategy, world, 1, s.workload_args),
        world,
        measurement_status="recommended",
        warnings=run_warnings(results, best),
    )
