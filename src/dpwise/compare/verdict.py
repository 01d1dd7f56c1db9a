"""The recommendation: the runs weighed into Evidence, said by compare's text module (the
guide's claims are answered in compare/claims.py)."""

from __future__ import annotations

from dpwise.compare import text
from dpwise.compare.checks.base import (
    Comparison,
    compare,
    diverged,
    median_rate,
    params_agree,
)
from dpwise.compare.checks.contention import impossible, machine_load
from dpwise.compare.checks.speed import drifted
from dpwise.compare.evidence import (
    Busy,
    Contention,
    Doubt,
    Drift,
    Evidence,
    ReferenceDiverged,
    Unsure,
)
from dpwise.measure.agreement import Untrained
from dpwise.results.records import Recommendation, Run


def recommend(
    runs: list[Run],
    tolerance: float,
    device_type: str,
    known_cause: str | None = None,
    untrained: Untrained | None = None,
    cores: int | None = None,
) -> Recommendation:
    """The fastest run that is faster than single beyond the noise; otherwise single.

    A run that changed the model is a candidate only when the cause is known (e.g. BatchNorm) and
    is then named; runs of one process or one device are never preferred to single. When the
    evidence cannot separate a candidate from single, or a one-process run disagrees with single,
    the status is "inconclusive" (with the reason) and single stays the safe default.
    """
    found = weigh(runs, tolerance, device_type, known_cause, untrained, cores)
    best, runner = found.best, found.runner
    return Recommendation(
        strategy=best.strategy,
        world_size=best.world_size,
        run=best.id,
        runner_up=None if runner is None else runner.id,
        headline=text.headline(found),
        reasons=tuple(text.reasons(found)),
        status="inconclusive" if found.doubt else "recommended",
        inconclusive_reason=text.doubt(found.doubt),
        diverged=tuple(r.id for r in runs if diverged(r)),  # never recommended
        vs_single={k: c.to_dict() for k, c in found.vs.items()},
    )


def weigh(
    runs: list[Run],
    tolerance: float,
    device_type: str,
    known_cause: str | None = None,
    untrained: Untrained | None = None,
    cores: int | None = None,
) -> Evidence:
    """The runs weighed against single (see recommend)."""
    single = runs[0]
    ok = [r for r in runs if not diverged(r) and (params_agree(r, tolerance) or known_cause)]
    parallel = [r for r in ok if r.world_size > 1 and not r.notes]
    vs = {r.id: compare(r, single) for r in parallel}
    ranked = sorted(parallel, key=median_rate, reverse=True)
    faster = [r for r in ranked if vs[r.id].outcome == "faster"]
    doubt = _contended(runs, device_type, cores) or _inconclusive(runs, ranked, vs, bool(faster))
    best = faster[0] if faster and not doubt else single
    return Evidence(
        runs=tuple(runs),
        best=best,
        runner=next((r for r in [*ranked, single] if r is not best), None),
        vs=vs,
        doubt=doubt,
        tolerance=tolerance,
        known_cause=known_cause,
        untrained=untrained,
        device_type=device_type,
    )


def _contended(runs: list[Run], device_type: str, cores: int | None) -> Doubt | None:
    """Why the figures measure the machine's load rather than the strategies, or None (also
    where the machine's cores are not known)."""
    found = impossible(runs, device_type, cores) if cores else []
    if found and cores:
        return Contention(tuple(found), cores)
    load = machine_load(runs)
    return Busy(load) if load and load.get("busy") else None


def _inconclusive(
    runs: list[Run], ranked: list[Run], vs: dict[str, Comparison], any_faster: bool
) -> Doubt | None:
    """Why the evidence cannot pick a run, or None when it can: the machine's speed was not
    steady (a one-process run disagrees with single), or no run is faster and one might be."""
    if diverged(runs[0]):
        return ReferenceDiverged()
    drift = drifted(runs)
    if drift:
        return Drift(tuple(drift))
    unsure = [r for r in ranked if vs[r.id].outcome == "inconclusive"]
    return Unsure(vs[unsure[0].id]) if unsure and not any_faster else None
