"""Check 1, convergence: every run's parameters against the single-process reference."""

from __future__ import annotations

import math

from dpwise.compare.checks.base import (
    Check,
    CheckContext,
    CheckResult,
    Diagnosis,
    buffers_beyond,
    diverged,
    median_rate,
    params_agree,
)
from dpwise.diagnosis.layers import group
from dpwise.diagnosis.unused import REDUCTION_ERROR
from dpwise.infra.units import rate, sci
from dpwise.measure.agreement import ULPS
from dpwise.results.records import Run
from dpwise.strategies import reference, traits
from dpwise.train.finite import Divergence

NAME = "convergence"


def evaluate(ctx: CheckContext) -> CheckResult:
    runs, tolerance, why = list(ctx.runs), ctx.tolerance, ctx.diagnosis
    others = [r for r in runs if r.id != reference()]
    diffs = {r.id: r.max_param_diff_vs_single for r in others}
    buffered = any(r.max_buffer_diff_vs_single is not None for r in others)
    columns = ["run", "max |Δparam| vs single"]
    columns += ["max |Δbuffer| vs single"] if buffered else []
    rows = [
        [r.label, _diff_text(r)]
        + ([_buffer_text(r)] if buffered else [])
        + [_loss_text(r.losses[-1])]
        for r in runs
        if r.losses
    ]
    table = {"columns": [*columns, "final loss"], "rows": rows}
    figures = {
        "tolerance": tolerance,
        "max_diff": diffs,
        "max_buffer_diff": {r.id: r.max_buffer_diff_vs_single for r in others},
        "parameter_dtypes": why.param_dtypes,
        "ddp_options": why.ddp_options,
    }
    if why.untrained is not None:
        figures["untrained"] = why.untrained.to_json()
    bad = [r for r in runs if diverged(r)]
    if bad:
        return _diverged(runs, bad, tolerance, figures, table)
    worst = max(diffs.values(), default=0.0)
    note = ddp_options_note(runs, why)
    flag = "; ddp ran with find_unused_parameters=True" if note else ""
    within = f"(tolerance {_tolerance_text(tolerance, why)})"
    failing = [r.label for r in others if not params_agree(r, tolerance)]
    if failing:
        return CheckResult(
            NAME,
            "fail",
            f"{', '.join(failing)} differ from single by up to {sci(worst)} {within}{flag}",
            explain_divergence(why, failing) + _buffers_note(others, why) + note,
            figures,
            table,
            "loss.png",
        )
    if why.untrained:
        return CheckResult(
            NAME,
            "warn",
            f"every run ends within {sci(worst)} of the single-process parameters {within}, but "
            f"{_untrained_count(why)} never changed in any run: the runs agree on what did not "
            "train",
            untrained_text(why) + _buffers_note(others, why) + note,
            figures,
            table,
            "loss.png",
        )
    bn = {layer.name for layer in why.batchnorm}
    normed = [r for r in others if any(b.rpartition(".")[0] in bn for b in buffers_beyond(r))]
    if normed:  # BatchNorm computed other statistics: the parameters will follow
        worst_buffer = max(r.max_buffer_diff_vs_single or 0.0 for r in normed)
        labels = [r.label for r in normed]
        return CheckResult(
            NAME,
            "fail",
            f"{', '.join(labels)}: BatchNorm statistics differ from single by up to "
            f"{sci(worst_buffer)}; parameters still within {sci(worst)} {within}{flag}",
            explain_divergence(why, labels) + note,
            figures,
            table,
            "loss.png",
        )
    differing = _differing(others)
    if differing:
        worst_buffer = max(r.max_buffer_diff_vs_single or 0.0 for r in others)
        return CheckResult(
            NAME,
            "warn",
            f"every run ends within {sci(worst)} of the single-process parameters {within}; "
            f"buffers differ by up to {sci(worst_buffer)} ({_names(differing)}){flag}",
            buffers_text(others, why) + note,
            figures,
            table,
            "loss.png",
        )
    return CheckResult(
        NAME,
        "pass",
        f"every run ends within {sci(worst)} of the single-process parameters {within}{flag}",
        _agreement(why) + note,
        figures,
        table,
        "loss.png",
    )


def _names(names: list[str], shown: int = 3) -> str:
    more = f", … ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _tolerance_text(tolerance: float, why: Diagnosis) -> str:
    """'1.0e-04', or '1.0e-04; bf16 parameters: 2 bf16 ulps at each tensor's largest value'."""
    narrow = [d for d in why.param_dtypes if d in ("bf16", "fp16")]
    if not narrow:
        return sci(tolerance)
    kinds = " and ".join(narrow)
    return (
        f"{sci(tolerance)}, or {ULPS} {kinds} units in the last place at a {kinds} tensor's "
        "largest value where that is more"
    )


def _buffer_text(run: Run) -> str:
    diff = run.max_buffer_diff_vs_single
    return "—" if diff is None else sci(diff)


def _untrained_count(why: Diagnosis) -> str:
    u = why.untrained
    assert u is not None
    return f"{u.elements:,} of {u.trainable_elements:,} trainable parameter values"


def untrained_text(why: Diagnosis) -> str:
    """Trainable parameters that ended where they started in every run, single included."""
    u = why.untrained
    assert u is not None
    never = why.unused.always
    probe = (
        f" Running the model on {why.unused.batch_count} different batches found no gradient "
        f"reaching {group(never)}."
        if never
        else ""
    )
    return (
        f"{_untrained_count(why)} ({_names(list(u.names))}) received no update in any run, single "
        "included: every strategy agrees on them because nothing trained them, so the agreement "
        f"says nothing about them.{probe} A frequent cause: torch.utils.checkpoint with "
        "use_reentrant=True around a block whose inputs need no gradient (the block's parameters "
        "get none); use use_reentrant=False, or make sure the parameters are meant to train "
        "(requires_grad=False for frozen ones)."
    )


def buffers_text(others: list[Run], why: Diagnosis) -> str:
    """Why buffers differ while the parameters agree: which, updated where, read or not."""
    differing = _differing(others)
    known = {b.name: b for b in why.buffers}
    named = [known[n].describe() for n in differing if n in known]
    unknown = [n for n in differing if n not in known]
    read = [n for n in differing if n in known and known[n].used]
    parts = []
    if named:
        parts.append("; ".join(named[:4]) + ("; …" if len(named) > 4 else ""))
    if unknown:
        parts.append(f"{_names(unknown)} (not seen changing in a forward of the probe)")
    effect = (
        f"The loss reads {_names(read)}, so the parameters follow rank 0's statistic rather "
        "than the global batch's: they still agree within the tolerance over these steps, but "
        "the gap grows with training. Fix: update the buffer from the global batch (all-reduce "
        "the statistic in forward, as SyncBatchNorm does), or compare with it frozen."
        if read
        else "The loss does not read them, so training is unaffected; a buffer used after "
        "training (an EMA of the weights, running statistics for evaluation) will differ. Fix "
        "where it matters: update it from the global batch (all-reduce the statistic in "
        "forward, as SyncBatchNorm does)."
    )
    return (
        f"The parameters agree, but buffers differ: {'; '.join(parts)}. A buffer the forward "
        "updates follows the rows it saw: under DDP each process updates it from its own share "
        "of the batch, and DDP broadcasts rank 0's buffers to the others before every forward "
        "(broadcast_buffers=True), so the saved buffer is rank 0's, computed from rank 0's rows "
        f"only (fsdp keeps each process's own; rank 0's is saved). {effect}"
    )


def _differing(others: list[Run]) -> list[str]:
    """The buffers beyond the tolerance in any run, by name."""
    return sorted({b for r in others for b in buffers_beyond(r)})


def _buffers_note(others: list[Run], why: Diagnosis) -> str:
    differing = _differing(others)
    if not differing:
        return ""
    return f" Buffers differ too: {_names(differing)}."


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
    if why.read_buffers:
        causes.append(
            f"The forward updates buffers from its rows and the loss reads them: "
            f"{'; '.join(b.where for b in why.read_buffers[:4])}. Each process updates them from "
            "its own share of the batch, and DDP broadcasts rank 0's buffers to the others before "
            "every forward (broadcast_buffers=True): the loss then reads a statistic of rank 0's "
            "rows, not of the global batch the single process saw. Fix: compute the statistic "
            "over the global batch (all-reduce it in forward, as SyncBatchNorm does), or compare "
            "with the buffer frozen."
        )
    sharded = [f for f in failing if f.startswith("fsdp")]
    if why.unused.batches and sharded:
        causes.append(
            f"{group(why.unused.batches)} are used on some batches only. In a step where one "
            "process's rows use them and another's do not, FSDP2 reduce-scatters only the "
            "gradients each process has, packed together: the processes' packs do not line up, "
            f"so {', '.join(sharded)} trained on mixed-up gradients without an error. ddp "
            "(with find_unused_parameters=True) reduces every parameter every step and agrees "
            "with single. Fix: use ddp for this model, or make every branch run on every batch "
            "(multiply an unused branch's output by zero)."
        )
    narrow = [d for d in why.param_dtypes if d in ("bf16", "fp16")]
    if narrow:
        kinds = " and ".join(narrow)
        causes.append(
            f"The parameters are held in {kinds}: every update rounds them to {kinds}, and a "
            "process that sums its own share of the batch rounds differently from one that sums "
            f"it all, so the runs drift apart by units of {kinds}'s last place (the tolerance "
            f"allows {ULPS}). Fix: keep fp32 parameters and compute in {kinds} with --precision "
            f"{narrow[0]} (autocast), or accept the drift."
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
            f"no known cause was found in the model ({how}; no BatchNorm, no buffer the loss "
            "reads, no sum-reduced loss, fp32 parameters and compute): look for "
            "non-deterministic kernels or randomness drawn outside the model."
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
