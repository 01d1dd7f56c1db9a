"""compare's sentences for the verdict: the recommendation's headline, reasons and why it is
inconclusive, said from the Evidence the verdict weighed (the checks' own sentences are in
checks/text.py)."""

from __future__ import annotations

from dpwise.compare.checks.base import diverged, params_agree
from dpwise.compare.checks.text import busy_text, impossible_text
from dpwise.compare.checks.thresholds import CONFIDENCE
from dpwise.compare.evidence import (
    Busy,
    Contention,
    Doubt,
    Drift,
    Evidence,
    ReferenceDiverged,
    Unsure,
)
from dpwise.infra.units import rate, sci
from dpwise.results.filters import one_process_per_device
from dpwise.results.records import Run


def doubt(found: Doubt | None) -> str | None:
    """Why the evidence cannot decide, in one sentence (None: it can)."""
    if isinstance(found, Contention):
        return (
            "figures this CPU cannot produce, from contention: "
            f"{impossible_text(found.found, found.cores)}; other processes slowed the runs "
            "unevenly. Run again on a quieter machine"
        )
    if isinstance(found, Busy):
        return busy_text(found.load)
    if isinstance(found, ReferenceDiverged):
        return (
            "the loss of the single-process run, the reference, became non-finite (see the "
            "convergence check): fix the divergence and run dpwise compare again"
        )
    if isinstance(found, Drift):
        return (
            f"{', '.join(found.labels)} should match single's speed but differ beyond the noise, "
            "so the machine's speed was not steady while the runs took turns; run again on a "
            "quieter machine"
        )
    if isinstance(found, Unsure):
        return found.comparison.reason
    return None


def headline(e: Evidence) -> str:
    if diverged(e.single):
        return "No recommendation: the training diverged (a non-finite loss); fix it first"
    if e.doubt:
        return "Inconclusive on this machine: keep a single process until a quieter run decides"
    what = e.best.label if e.best is not e.single else "a single process"
    return f"Use {what} on this machine for this model"


def reasons(e: Evidence) -> list[str]:
    said = [_best_reason(e)]
    if e.runner is not None:
        said.append(
            f"runner-up: {e.runner.label} at {rate(e.runner.median_rate)} samples/s "
            f"({e.runner.speedup_vs_single:.2f}× single)"
        )
    why = doubt(e.doubt)
    if why:
        said.insert(0, f"inconclusive: {why}")
    said.append(_agreement(e))
    if e.untrained:
        said.append(
            f"{e.untrained.elements:,} of {e.untrained.trainable_elements:,} trainable parameter "
            "values never changed in any run: the runs agree on what did not train (see the "
            "convergence check)"
        )
    if e.device_type == "cpu" and e.best is e.single:
        said.append(_cpu_reason(list(e.runs)))
    return said


def _best_reason(e: Evidence) -> str:
    best = e.best
    spread = f"{best.samples_per_s.min:,.0f}–{best.samples_per_s.max:,.0f}"
    extra = ""
    vs = e.vs.get(best.id)
    if best is not e.single and vs is not None:
        extra = (
            f", {best.speedup:.2f}× the single process ({CONFIDENCE:.0%} interval "
            f"of the per-round ratio {vs.interval} over {vs.rounds} rounds)"
        )
    return (
        f"{best.label} trains at {rate(best.median_rate)} samples/s "
        f"({spread} over the repeats){extra}"
    )


def _agreement(e: Evidence) -> str:
    bad = [r.label for r in e.runs if diverged(r)]
    if bad:
        return f"the loss of {', '.join(bad)} diverged: a run that diverged is never recommended"
    worst = max(r.param_diff for r in e.runs)
    if all(params_agree(r, e.tolerance) for r in e.runs):
        return f"parameters of every run agree with single within {sci(worst)}"
    return f"some runs differ from single by up to {sci(worst)}" + (
        f" because of {e.known_cause}: see the convergence check" if e.known_cause else ""
    )


def _cpu_reason(runs: list[Run]) -> str:
    ddp = [r for r in one_process_per_device(runs) if r.world_size > 1]
    if not ddp:
        return "this machine has no GPU: every run used the CPU"
    top = max(ddp, key=lambda r: r.world_size)
    return (
        f"no GPU: {top.label} split the CPU's cores between processes "
        f"({top.threads_per_process} thread(s) each), so DDP adds communication without "
        "adding compute"
    )
