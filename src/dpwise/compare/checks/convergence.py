"""Check 1, convergence: every run's parameters against the single-process reference; what it
finds is data (a ConvergenceFinding and its cause), checks/text.py says it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from dpwise.compare.checks.base import (
    CheckContext,
    Diagnosis,
    Finding,
    buffers_beyond,
    diverged,
    params_agree,
)
from dpwise.infra.units import sci
from dpwise.results.records import CheckStatus, Json, Run, Table
from dpwise.strategies import reference, traits

NAME = "convergence"
PLOT = "loss.png"


@dataclass(frozen=True)
class Diverged:
    """Runs whose loss went NaN or infinite; ``first`` went first."""

    runs: tuple[Run, ...]
    first: Run
    reference_diverged: bool
    others_worst: float | None  # of the runs that did not diverge (None: none, or single did)


@dataclass(frozen=True)
class ParamsDiffer:
    """Runs whose parameters left single's beyond the tolerance (``sharded``: those of them
    that shard the model)."""

    labels: tuple[str, ...]
    sharded: tuple[str, ...]


@dataclass(frozen=True)
class NothingTrained:
    """The runs agree, but trainable parameters never changed in any run."""


@dataclass(frozen=True)
class StatsDiffer:
    """BatchNorm computed other statistics in these runs: the parameters will follow."""

    labels: tuple[str, ...]
    sharded: tuple[str, ...]
    worst_buffer: float


@dataclass(frozen=True)
class BuffersDiffer:
    """The parameters agree, some buffers do not."""

    worst_buffer: float


@dataclass(frozen=True)
class Agree:
    """Every run's parameters and buffers within the tolerance of single's."""


Cause = Diverged | ParamsDiffer | NothingTrained | StatsDiffer | BuffersDiffer | Agree


@dataclass(frozen=True)
class UnusedSearch:
    """ddp ran with find_unused_parameters=True; single's and ddp × 1's samples/s, if both ran."""

    single_rate: float | None
    one_process_rate: float | None


@dataclass(frozen=True, kw_only=True)
class ConvergenceFinding(Finding):
    cause: Cause
    diagnosis: Diagnosis
    tolerance: float
    worst: float  # the largest parameter difference from single of any run (0: one diverged)
    others: tuple[Run, ...]  # every run but single
    differing: tuple[str, ...]  # the buffers beyond the tolerance in any run, by name
    unused_search: UnusedSearch | None


def find(ctx: CheckContext) -> ConvergenceFinding:
    runs, why = list(ctx.runs), ctx.diagnosis
    others = tuple(r for r in runs if r.id != reference())
    status, cause = _cause(runs, others, ctx.tolerance, why)
    return ConvergenceFinding(
        status=status,
        figures=_figures(others, ctx.tolerance, why, cause),
        table=_table(runs, others),
        plot=PLOT,
        cause=cause,
        diagnosis=why,
        tolerance=ctx.tolerance,
        worst=0.0
        if isinstance(cause, Diverged)
        else max((r.param_diff for r in others), default=0.0),
        others=others,
        differing=_differing(others),
        unused_search=_unused_search(runs, why),
    )


def _cause(
    runs: list[Run], others: tuple[Run, ...], tolerance: float, why: Diagnosis
) -> tuple[CheckStatus, Cause]:
    bad = [r for r in runs if diverged(r)]
    if bad:
        return "fail", _diverged(runs, bad, tolerance)
    failing = [r for r in others if not params_agree(r, tolerance)]
    if failing:
        return "fail", ParamsDiffer(*_labels(failing))
    if why.untrained:
        return "warn", NothingTrained()
    bn = {layer.name for layer in why.batchnorm}
    normed = [r for r in others if any(b.rpartition(".")[0] in bn for b in buffers_beyond(r))]
    if normed:
        worst = max(r.max_buffer_diff_vs_single or 0.0 for r in normed)
        return "fail", StatsDiffer(*_labels(normed), worst)
    if _differing(others):
        return "warn", BuffersDiffer(max(r.max_buffer_diff_vs_single or 0.0 for r in others))
    return "pass", Agree()


def _diverged(runs: list[Run], bad: list[Run], tolerance: float) -> Diverged:
    first = min(bad, key=lambda r: (r.diverged or {}).get("step", 0))
    healthy = [r for r in runs if r.id != reference() and all(r is not b for b in bad)]
    single_bad = any(runs[0] is b for b in bad)
    worst = max(r.param_diff for r in healthy) if healthy and not single_bad else None
    return Diverged(tuple(bad), first, single_bad, worst)


def _labels(runs: list[Run]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The runs' labels, and those of the runs that shard the model."""
    sharding = tuple(r.label for r in runs if traits(r.strategy).shards_model)
    return tuple(r.label for r in runs), sharding


def _differing(others: tuple[Run, ...]) -> tuple[str, ...]:
    """The buffers beyond the tolerance in any run, by name."""
    return tuple(sorted({b for r in others for b in buffers_beyond(r)}))


def _unused_search(runs: list[Run], why: Diagnosis) -> UnusedSearch | None:
    """Whether the ddp runs passed find_unused_parameters=True, and what single and ddp × 1
    (single's work with the option) measured."""
    if not why.ddp_options.get("find_unused_parameters"):
        return None
    single = next((r for r in runs if r.id == reference()), None)
    one = next((r for r in runs if traits(r.strategy).process_group and r.world_size == 1), None)
    if single is None or one is None:
        return UnusedSearch(None, None)
    return UnusedSearch(single.median_rate, one.median_rate)


def _figures(others: tuple[Run, ...], tolerance: float, why: Diagnosis, cause: Cause) -> Json:
    figures: Json = {
        "tolerance": tolerance,
        "max_diff": {r.id: r.max_param_diff_vs_single for r in others},
        "max_buffer_diff": {r.id: r.max_buffer_diff_vs_single for r in others},
        "parameter_dtypes": why.param_dtypes,
        "ddp_options": why.ddp_options,
    }
    if why.untrained is not None:
        figures["untrained"] = why.untrained.to_json()
    if isinstance(cause, Diverged):
        figures["diverged"] = {r.id: r.diverged for r in cause.runs}
    return figures


def _table(runs: list[Run], others: tuple[Run, ...]) -> Table:
    buffered = any(r.max_buffer_diff_vs_single is not None for r in others)
    columns = ["run", "max |Δparam| vs single"]
    columns += ["max |Δbuffer| vs single"] if buffered else []
    return {
        "columns": [*columns, "final loss"],
        "rows": [_row(r, buffered) for r in runs if r.losses],
    }


def _row(r: Run, buffered: bool) -> list[str]:
    buffer = r.max_buffer_diff_vs_single
    loss = r.losses[-1]
    return [
        r.label,
        "not finite" if diverged(r) else sci(r.max_param_diff_vs_single),
        *(["—" if buffer is None else sci(buffer)] if buffered else []),
        "not finite" if loss is None or not math.isfinite(loss) else f"{loss:.4f}",
    ]
