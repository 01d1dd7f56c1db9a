"""Check 1, convergence: every run's parameters against the single-process reference."""

from __future__ import annotations

import math

from dpwise.compare.checks.base import (
    Check,
    CheckContext,
    CheckResult,
    Diagnosis,
    diverged,
    median_rate,
)
from dpwise.diagnosis.layers import group
from dpwise.diagnosis.unused import REDUCTION_ERROR
from dpwise.infra.units import rate, sci
from dpwise.results.records import Run
from dpwise.strategies import reference, traits
from dpwise.train.finite import Divergence

NAME = "convergence"


def evaluate(ctx: CheckContext) -> CheckResult:
    runs, tolerance, why = list(ctx.runs), ctx.tolerance, ctx.diagnosis
    others = [r for r in runs if r.id != reference()]
    diffs = {r.id: r.max_param_diff_vs_single for r in others}
    rows = [[r.label, _diff_text(r), _loss_text(r.losses[-1])] for r in runs if r.losses]
    table = {"columns": ["run", "max |Δparam| vs single", "final loss"], "rows": rows}
    figures = {"tolerance": tolerance, "max_diff": diffs, "ddp_options": why.ddp_options}
    bad = [r for r in runs if diverged(r)]
    if bad:
        return _diverged(runs, bad, tolerance, figures, table)
    worst = max(diffs.values(), default=0.0)
    note = ddp_options_note(runs, why)
    flag = "; ddp ran with find_unused_parameters=True" if note else ""
    if worst <= tolerance:
        return CheckResult(
            NAME,
            "pass",
            f"every run ends within {sci(worst)} of the single-process parameters "
            f"(tolerance {sci(tolerance)}){flag}",
            _agreement(why) + note,
            figures,
            table,
            "loss.png",
        )
    failing = [r.label for r in others if r.max_param_diff_vs_single > tolerance]
    return CheckResult(
        NAME,
        "fail",
        f"{', '.join(failing)} differ from single by up to {sci(worst)} "
        f"(tolerance {sci(tolerance)}){flag}",
        explain_divergence(why, failing) + note,
        figures,
        table,
        "loss.png",
    )


def _loss_text(loss: float | None) -> str:
    return "not finite" if loss is None or not math.isfinite(loss) else f"{loss:.4f}"


def _diff_text(run: Run) -> str:
    return "not finite" if diverged(run) else sci(run.max_param_diff_vs_single)


def divergence_text(run: Run) -> str:
    """'single: the loss became nan at step 2 (…); likely cause: …' for a run that diverged."""
    found = run.diverged
    if not found:
        return f"{run.label}: a loss of the run was not finite"
    return f"{run.label}: {Divergence(**found).summary()}"


def _others(first: Run, others: list[Run]) -> str:
    """The other diverged runs, briefly: their step, and their cause where it differs."""
    if not others:
        return ""
    cause = (first.diverged or {}).get("cause")

    def one(run: Run) -> str:
        found = run.diverged or {}
        text = run.label + (f" at step {found['step']}" if found.get("step") else "")
        if found.get("cause") and found["cause"] != cause:
            text += f" (likely cause: {found['cause']})"
        return text

    return f"Also diverged: {'; '.join(one(r) for r in others)}."


def _diverged(
    runs: list[Run], bad: list[Run], tolerance: float, figures: dict, table: dict
) -> CheckResult:
    """Runs whose loss went NaN or infinite: named, with the step and the likely cause."""
    first = min(bad, key=lambda r: (r.diverged or {}).get("step", 0))
    step = (first.diverged or {}).get("step")
    at = f"first {first.label} at step {step}" if step else f"first {first.label}"
    summary = (
        f"{', '.join(r.label for r in bad)} diverged: the loss became non-finite ({at}); "
        "non-finite parameters cannot be compared with single"
    )
    healthy = [r for r in runs if r.id != reference() and all(r is not b for b in bad)]
    if any(runs[0] is b for b in bad):
        rest = "single is the reference, so no run could be compared with it."
    elif healthy:
        worst = max(r.max_param_diff_vs_single for r in healthy)
        held = "within" if worst <= tolerance else "beyond the tolerance, up to"
        rest = f"The other runs end {held} {sci(worst)} of single (tolerance {sci(tolerance)})."
    else:
        rest = ""
    explanation = " ".join(
        [
            divergence_text(first) + ".",
            _others(first, [r for r in bad if r is not first]),
            rest,
            "A diverged run's speed says nothing about training: fix the divergence (the "
            "likely cause is named above) and run dpwise compare again.",
        ]
    )
    figures = {**figures, "diverged": {r.id: r.diverged for r in bad}}
    return CheckResult(NAME, "fail", summary, explanation, figures, table, "loss.png")


def _agreement(why: Diagnosis) -> str:
    if why.stochastic:
        return (
            f"The model has random layers ({group(why.stochastic)}): each device draws its own "
            "random numbers, so the runs are not the same computation, but here their parameters "
            "stayed within the tolerance. Longer training or a larger learning rate can move "
            "them apart; compare with these layers disabled to test equivalence."
        )
    return (
        "All runs trained on the same global batches in the same order from the same initial "
        "weights with a mean-reduced loss, so their parameters agree to floating-point "
        "rounding: the strategies are interchangeable for this model."
    )


def _random_layers(why: Diagnosis) -> str:
    found = "found by running the model" if why.probe_skipped is None else "found by class name"
    return (
        f"Random layers ({group(why.stochastic)}; {found}) draw random numbers in training mode, "
        "and each device draws its own for its own rows: a device's mask cannot equal the slice "
        "of the single process's mask for the same rows, so seeding every process alike does not "
        "make the runs agree. Fix: compare with these layers disabled (p=0 or drop_path_rate=0, "
        "or the layers in eval mode); training with them is fine, the runs only differ by chance."
    )


def explain_divergence(why: Diagnosis, failing: list[str]) -> str:
    causes = []
    if why.batchnorm:
        causes.append(
            f"BatchNorm layers ({group(why.batchnorm)}) normalise with the statistics of each "
            "device's share of the batch, not of the global batch. Fix: for ddp convert them with "
            "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) (DataParallel cannot sync them), "
            "or compare with the BatchNorm layers in eval mode."
        )
    if why.stochastic:
        causes.append(_random_layers(why))
    if why.loss_reduction != "mean":
        causes.append(
            f"the loss is {why.loss_reduction}-reduced, so DDP's gradient average does not equal "
            "the global gradient. Fix: use reduction='mean'."
        )
    if why.precision != "fp32":
        causes.append(
            f"--precision {why.precision} rounds each device's share of the batch separately; "
            "differences around 1e-3 are expected. Fix: compare in fp32."
        )
    if not causes:
        how = (
            "a training-mode run of the model under several seeds found no random layer"
            if why.probe_skipped is None
            else f"the model was not run ({why.probe_skipped}), only its layer classes were read"
        )
        causes.append(
            f"no known cause was found in the model ({how}; no BatchNorm or sum-reduced loss, "
            "fp32): look for non-deterministic kernels or randomness drawn outside the model."
        )
    return f"{', '.join(failing)} did not reproduce the single-process run. " + " ".join(causes)


def ddp_options_note(runs: list[Run], why: Diagnosis) -> str:
    """Why the ddp runs passed find_unused_parameters=True, and what it cost as measured here."""
    if not why.ddp_options.get("find_unused_parameters"):
        return ""
    text = (
        " The ddp runs passed find_unused_parameters=True to DistributedDataParallel because "
        f"running the model left parameters without gradient: {why.unused.describe()}. Without "
        f'the option DDP stops at the next step ("{REDUCTION_ERROR} …"); with it DDP searches '
        "the autograd graph after every forward for the parameters the loss did not reach."
    )
    single = next((r for r in runs if r.id == reference()), None)
    one = next((r for r in runs if traits(r.strategy).process_group and r.world_size == 1), None)
    if single is None or one is None:
        return text
    ratio = median_rate(single) / median_rate(one)
    return text + (
        f" Cost measured here: ddp × 1 (one process doing single's work, with the option) trained "
        f"at {rate(median_rate(one))} samples/s against single's {rate(median_rate(single))}, "
        f"{ratio:.2f}× single's time per sample; that includes DDP's own one-process overhead "
        "(gradient buckets, a one-member all-reduce) as well as the search."
    )


CONVERGENCE = Check(NAME, evaluate)
