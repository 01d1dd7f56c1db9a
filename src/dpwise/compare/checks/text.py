"""The checks' sentences: each check's finding said as a summary and an explanation.

The check modules find (data, no prose); this module says what they found, in the words
results.json and the report carry."""

from __future__ import annotations

from dpwise.compare.checks.base import Diagnosis, Said, compare, peak
from dpwise.compare.checks.communication import CommunicationFinding, profile
from dpwise.compare.checks.contention import Contended
from dpwise.compare.checks.convergence import (
    BuffersDiffer,
    ConvergenceFinding,
    Diverged,
    NothingTrained,
    ParamsDiffer,
    StatsDiffer,
)
from dpwise.compare.checks.memory import DpVsDdp, FsdpVsDdp, MemoryFinding
from dpwise.compare.checks.scalability import ScalabilityFinding
from dpwise.compare.checks.speed import SpeedFinding, extra_seconds
from dpwise.compare.checks.thresholds import (
    CONFIDENCE,
    EXPOSED_SHARE_LIMIT,
    ONE_PROCESS_MARGIN,
    SPEED_MARGIN,
)
from dpwise.diagnosis.layers import group
from dpwise.diagnosis.unused import REDUCTION_ERROR
from dpwise.infra.units import mib, pct, rate, sci
from dpwise.measure.agreement import ULPS, Untrained
from dpwise.results.records import Json, Run
from dpwise.train.finite import Divergence

# --- contention (speed, scalability and the verdict) ------------------------------------------


def impossible_text(found: list[Contended] | tuple[Contended, ...], cores: int) -> str:
    """'ddp × 2 at 8.10× single (at most 2.50× on 2 cores), …'."""
    return ", ".join(
        f"{c.run.label} at {c.run.speedup:.2f}× single (at most {c.bound:.2f}× on {cores} "
        f"core{'s' if cores != 1 else ''})"
        for c in found
    )


def busy_text(load: Json | None) -> str | None:
    """'other processes used 62 % of the machine's cores …' when the machine was busy, else
    None."""
    if not load or not load.get("busy"):
        return None
    share = load["other_cpu_share"]
    return (
        f"the machine was busy: other processes used {pct(share['median'])} of its cores while "
        f"the runs measured (up to {pct(share['max'])} in a repeat), so throughput measures the "
        "contention as much as the strategies"
    )


# --- convergence -------------------------------------------------------------------------------


def convergence(f: ConvergenceFinding) -> Said:
    c, why = f.cause, f.diagnosis
    if isinstance(c, Diverged):
        return Said(_diverged_summary(c), _diverged_explanation(c, f.tolerance))
    note = _unused_note(f)
    flag = "; ddp ran with find_unused_parameters=True" if note else ""
    within = f"(tolerance {_tolerance_text(f.tolerance, why)})"
    worst = sci(f.worst)
    if isinstance(c, ParamsDiffer):
        return Said(
            f"{', '.join(c.labels)} differ from single by up to {worst} {within}{flag}",
            explain_divergence(why, list(c.labels), c.sharded) + _buffers_note(f) + note,
        )
    if isinstance(c, NothingTrained):
        return Said(
            f"every run ends within {worst} of the single-process parameters {within}, but "
            f"{_untrained_count(why)} never changed in any run: the runs agree on what did not "
            "train",
            untrained_text(why) + _buffers_note(f) + note,
        )
    if isinstance(c, StatsDiffer):
        return Said(
            f"{', '.join(c.labels)}: BatchNorm statistics differ from single by up to "
            f"{sci(c.worst_buffer)}; parameters still within {worst} {within}{flag}",
            explain_divergence(why, list(c.labels), c.sharded) + note,
        )
    if isinstance(c, BuffersDiffer):
        return Said(
            f"every run ends within {worst} of the single-process parameters {within}; "
            f"buffers differ by up to {sci(c.worst_buffer)} ({_names(list(f.differing))}){flag}",
            buffers_text(f) + note,
        )
    return Said(
        f"every run ends within {worst} of the single-process parameters {within}{flag}",
        _agreement(why) + note,
    )


def _names(names: list[str], shown: int = 3) -> str:
    more = f", … ({len(names)} in all)" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _narrow(why: Diagnosis) -> list[str]:
    return [d for d in why.param_dtypes if d in ("bf16", "fp16")]


def _tolerance_text(tolerance: float, why: Diagnosis) -> str:
    """'1.0e-04', or '1.0e-04; bf16 parameters: 2 bf16 ulps at each tensor's largest value'."""
    narrow = _narrow(why)
    if not narrow:
        return sci(tolerance)
    kinds = " and ".join(narrow)
    return (
        f"{sci(tolerance)}, or {ULPS} {kinds} units in the last place at a {kinds} tensor's "
        "largest value where that is more"
    )


def _untrained_count(why: Diagnosis) -> str:
    u = why.untrained or Untrained()
    return f"{u.elements:,} of {u.trainable_elements:,} trainable parameter values"


def untrained_text(why: Diagnosis) -> str:
    """Trainable parameters that ended where they started in every run, single included."""
    u = why.untrained or Untrained()
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


BUFFER_READ = (
    "The loss reads {read}, so the parameters follow rank 0's statistic rather than the global "
    "batch's: they still agree within the tolerance over these steps, but the gap grows with "
    "training. Fix: update the buffer from the global batch (all-reduce the statistic in "
    "forward, as SyncBatchNorm does), or compare with it frozen."
)
BUFFER_UNREAD = (
    "The loss does not read them, so training is unaffected; a buffer used after training (an "
    "EMA of the weights, running statistics for evaluation) will differ. Fix where it matters: "
    "update it from the global batch (all-reduce the statistic in forward, as SyncBatchNorm "
    "does)."
)


def buffers_text(f: ConvergenceFinding) -> str:
    """Why buffers differ while the parameters agree: which, updated where, read or not."""
    differing = list(f.differing)
    known = {b.name: b for b in f.diagnosis.buffers}
    named = [known[n].describe() for n in differing if n in known]
    unknown = [n for n in differing if n not in known]
    read = [n for n in differing if n in known and known[n].used]
    parts = []
    if named:
        parts.append("; ".join(named[:4]) + ("; …" if len(named) > 4 else ""))
    if unknown:
        parts.append(f"{_names(unknown)} (not seen changing in a forward of the probe)")
    effect = BUFFER_READ.format(read=_names(read)) if read else BUFFER_UNREAD
    return (
        f"The parameters agree, but buffers differ: {'; '.join(parts)}. A buffer the forward "
        "updates follows the rows it saw: under DDP each process updates it from its own share "
        "of the batch, and DDP broadcasts rank 0's buffers to the others before every forward "
        "(broadcast_buffers=True), so the saved buffer is rank 0's, computed from rank 0's rows "
        f"only (fsdp keeps each process's own; rank 0's is saved). {effect}"
    )


def _buffers_note(f: ConvergenceFinding) -> str:
    return f" Buffers differ too: {_names(list(f.differing))}." if f.differing else ""


def divergence_text(run: Run) -> str:
    """'single: the loss became nan at step 2 (…); likely cause: …' for a run that diverged."""
    found = run.diverged
    if not found:
        return f"{run.label}: a loss of the run was not finite"
    return f"{run.label}: {Divergence(**found).summary()}"


def _also_diverged(first: Run, others: list[Run]) -> str:
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


def _diverged_summary(c: Diverged) -> str:
    step = (c.first.diverged or {}).get("step")
    at = f"first {c.first.label} at step {step}" if step else f"first {c.first.label}"
    return (
        f"{', '.join(r.label for r in c.runs)} diverged: the loss became non-finite ({at}); "
        "non-finite parameters cannot be compared with single"
    )


def _diverged_explanation(c: Diverged, tolerance: float) -> str:
    """Runs whose loss went NaN or infinite: named, with the step and the likely cause."""
    if c.reference_diverged:
        rest = "single is the reference, so no run could be compared with it."
    elif c.others_worst is not None:
        held = "within" if c.others_worst <= tolerance else "beyond the tolerance, up to"
        rest = (
            f"The other runs end {held} {sci(c.others_worst)} of single "
            f"(tolerance {sci(tolerance)})."
        )
    else:
        rest = ""
    return " ".join(
        [
            divergence_text(c.first) + ".",
            _also_diverged(c.first, [r for r in c.runs if r is not c.first]),
            rest,
            "A diverged run's speed says nothing about training: fix the divergence (the "
            "likely cause is named above) and run dpwise compare again.",
        ]
    )


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


BATCHNORM = (
    "BatchNorm layers ({layers}) normalise with the statistics of each device's share of the "
    "batch, not of the global batch. Fix: for ddp convert them with "
    "torch.nn.SyncBatchNorm.convert_sync_batchnorm(model) (DataParallel cannot sync them), or "
    "compare with the BatchNorm layers in eval mode."
)
SUM_LOSS = (
    "the loss is {reduction}-reduced, so DDP's gradient average does not equal the global "
    "gradient. Fix: use reduction='mean'."
)
READ_BUFFERS = (
    "The forward updates buffers from its rows and the loss reads them: {where}. Each process "
    "updates them from its own share of the batch, and DDP broadcasts rank 0's buffers to the "
    "others before every forward (broadcast_buffers=True): the loss then reads a statistic of "
    "rank 0's rows, not of the global batch the single process saw. Fix: compute the statistic "
    "over the global batch (all-reduce it in forward, as SyncBatchNorm does), or compare with "
    "the buffer frozen."
)
SOME_BATCHES = (
    "{layers} are used on some batches only. In a step where one process's rows use them and "
    "another's do not, FSDP2 reduce-scatters only the gradients each process has, packed "
    "together: the processes' packs do not line up, so {sharded} trained on mixed-up gradients "
    "without an error. ddp (with find_unused_parameters=True) reduces every parameter every "
    "step and agrees with single. Fix: use ddp for this model, or make every branch run on "
    "every batch (multiply an unused branch's output by zero)."
)
NARROW_PARAMETERS = (
    "The parameters are held in {kinds}: every update rounds them to {kinds}, and a process that "
    "sums its own share of the batch rounds differently from one that sums it all, so the runs "
    "drift apart by units of {kinds}'s last place (the tolerance allows {ulps}). Fix: keep fp32 "
    "parameters and compute in {kinds} with --precision {first} (autocast), or accept the drift."
)
PRECISION = (
    "--precision {precision} rounds each device's share of the batch separately; differences "
    "around 1e-3 are expected. Fix: compare in fp32."
)
NO_KNOWN_CAUSE = (
    "no known cause was found in the model ({how}; no BatchNorm, no buffer the loss reads, no "
    "sum-reduced loss, fp32 parameters and compute): look for non-deterministic kernels or "
    "randomness drawn outside the model."
)


def explain_divergence(why: Diagnosis, failing: list[str], sharded: tuple[str, ...] = ()) -> str:
    """Every known cause of the runs' difference, with its fix (``sharded``: the failing runs
    that shard the model)."""
    causes = _model_causes(why, sharded) + _precision_causes(why)
    if not causes:
        how = (
            "a training-mode run of the model under several seeds found no random layer"
            if why.probe_skipped is None
            else f"the model was not run ({why.probe_skipped}), only its layer classes were read"
        )
        causes.append(NO_KNOWN_CAUSE.format(how=how))
    return f"{', '.join(failing)} did not reproduce the single-process run. " + " ".join(causes)


def _model_causes(why: Diagnosis, sharded: tuple[str, ...]) -> list[str]:
    causes = []
    if why.batchnorm:
        causes.append(BATCHNORM.format(layers=group(why.batchnorm)))
    if why.stochastic:
        causes.append(_random_layers(why))
    if why.loss_reduction != "mean":
        causes.append(SUM_LOSS.format(reduction=why.loss_reduction))
    if why.read_buffers:
        where = "; ".join(b.where for b in why.read_buffers[:4])
        causes.append(READ_BUFFERS.format(where=where))
    if why.unused.batches and sharded:
        causes.append(
            SOME_BATCHES.format(layers=group(why.unused.batches), sharded=", ".join(sharded))
        )
    return causes


def _precision_causes(why: Diagnosis) -> list[str]:
    causes = []
    narrow = _narrow(why)
    if narrow:
        kinds = " and ".join(narrow)
        causes.append(NARROW_PARAMETERS.format(kinds=kinds, ulps=ULPS, first=narrow[0]))
    if why.precision != "fp32":
        causes.append(PRECISION.format(precision=why.precision))
    return causes


def _unused_note(f: ConvergenceFinding) -> str:
    """Why the ddp runs passed find_unused_parameters=True, and what it cost as measured here."""
    search = f.unused_search
    if search is None:
        return ""
    text = (
        " The ddp runs passed find_unused_parameters=True to DistributedDataParallel because "
        f"running the model left parameters without gradient: {f.diagnosis.unused.describe()}. "
        f'Without the option DDP stops at the next step ("{REDUCTION_ERROR} …"); with it DDP '
        "searches the autograd graph after every forward for the parameters the loss did not "
        "reach."
    )
    single, one = search.single_rate, search.one_process_rate
    if single is None or one is None:
        return text
    return text + (
        f" Cost measured here: ddp × 1 (one process doing single's work, with the option) trained "
        f"at {rate(one)} samples/s against single's {rate(single)}, "
        f"{single / one:.2f}× single's time per sample; that includes DDP's own one-process "
        "overhead (gradient buckets, a one-member all-reduce) as well as the search."
    )


# --- speed ---------------------------------------------------------------------------------------

RULE = (
    f"A run counts as faster than single only when the whole {CONFIDENCE:.0%} interval of its "
    f"per-round throughput ratio lies beyond {SPEED_MARGIN - 1:.0%}; an interval inside ±"
    f"{SPEED_MARGIN - 1:.0%} means no practical difference, and one that crosses the margin "
    "is inconclusive: the noise of this machine cannot separate the two."
)
ONE_PROCESS_NOTE = (
    " A run of one process on one device does single's work plus DDP's or DataParallel's "
    f"overhead, yet its throughput beats single's by more than {ONE_PROCESS_MARGIN - 1:.0%}"
    " over the whole interval. Interleaving spreads slow drift over every run, so this points "
    "at load that changed within rounds (other programs) or at a set-up difference such as the "
    "number of threads; run again on a quiet machine before trusting small differences."
)
WRAPPER_NOTE = (
    " A run of one process on one device does single's work plus its wrapper's: DDP's gradient "
    "hooks, bucket copies and a one-process all-reduce, or DataParallel's scatter and gather. "
    "That cost is fixed per step, so it is a visible share of a short step and shrinks as the "
    "step grows; on more devices it is paid again on top of the communication."
)


def speed(f: SpeedFinding) -> Said:
    best = f.best
    summary = (
        _contention(f.contended, busy_text(f.load), f.cores)
        + f"fastest: {best.label} at {rate(best.median_rate)} samples/s "
        f"({best.speedup:.2f}× single)" + _finding(f) + _costs(f.costly, f.single)
    )
    explanation = (
        f"Each run trained {f.repeats} times from the same initial state (the first epoch of a "
        "repeat is an untimed warm-up when it has more than one); the runs took turns in "
        f"{f.repeats} interleaved rounds, one run computing at a time, so a change in the "
        f"machine's speed hits every run alike, and each run is compared with single round by "
        f"round. {RULE}"
        + (ONE_PROCESS_NOTE if f.drift else "")
        + (WRAPPER_NOTE if f.costly else "")
        + _load_note(f.load)
    )
    return Said(summary, explanation)


def _load_note(load: Json | None) -> str:
    """How busy the machine was while the runs measured, said whether busy or not."""
    if not load:
        return ""
    share = load["other_cpu_share"]
    return (
        f" Other processes used {pct(share['median'])} of the machine's cores while the runs "
        f"measured (median over every repeat; up to {pct(share['max'])})"
        + ("; at 25 % or more the machine counts as busy." if load["busy"] else ".")
    )


def _contention(found: tuple[Contended, ...], busy: str | None, cores: int) -> str:
    """The summary's opening where contention made the figures: what no CPU can do, and the
    load."""
    parts = []
    if found:
        parts.append(
            f"figures this CPU cannot produce, from contention (other processes slowed the runs "
            f"unevenly), not from the strategies: {impossible_text(found, cores)}"
        )
    if busy:
        parts.append(busy)
    return "; ".join(parts) + ". " if parts else ""


def _finding(f: SpeedFinding) -> str:
    if f.drift:
        return (
            f"; {', '.join(f.drift)} should match single but differ beyond the noise: the "
            "machine's speed drifted within rounds or the set-up differs"
        )
    if f.faster:
        return f"; {', '.join(r.label for r in f.faster)} faster than single beyond the noise"
    if f.unsure:
        return f"; inconclusive for {', '.join(r.label for r in f.unsure)}: within the noise"
    if f.parallel:
        return "; no parallel run was faster than single"
    return ""


def _costs(costly: tuple[Run, ...], single: Run) -> str:
    epoch = single.epoch_seconds.median or 0.0
    return "".join(
        f"; {r.label} does single's work at {compare(r, single).ratio:.2f}× its speed: "
        f"{extra_seconds(r, single) * 1000:.0f} ms more per epoch "
        f"of {epoch * 1000:.0f} ms, its wrapper's fixed cost"
        for r in costly
    )


# --- scalability ---------------------------------------------------------------------------------

EFFICIENCY = "Scaling efficiency is the speed-up against single divided by the world size."


def scalability(f: ScalabilityFinding) -> Said:
    if f.top is None:
        return Said(
            "needs ddp at two or more world sizes",
            "Give --world-sizes with at least two sizes (e.g. 1,2).",
        )
    note = (
        f"Each process had {f.top.threads_per_process} of the {f.cores} CPU cores; the single "
        f"process used {f.single_threads}. On one CPU the processes share the same "
        "cores, so the ideal speed-up is about 1×, not the world size."
        if f.device_type == "cpu"
        else "Each process drives one GPU."
    )
    if f.contended:
        return Said(
            f"contention, not scaling: {impossible_text(f.contended, f.cores)}",
            f"{EFFICIENCY} On one CPU the processes share its {f.cores} cores, so no efficiency "
            "can be well above 100 %: these figures come from other processes slowing the "
            "multi-threaded single run more than the one-thread workers. Measure again on a "
            "quiet machine. " + note,
        )
    top = f.top.world_size
    return Said(
        f"throughput peaks at world size {f.peak_size}; efficiency at "
        f"{top}: {pct(f.efficiency[top])}",
        f"{EFFICIENCY} {note}",
    )


# --- memory --------------------------------------------------------------------------------------

WINDOW = (
    "CPU figures are the peak of live tensor memory recorded by torch.profiler from the model's "
    "construction (after the data set is built) through a few steps; CUDA figures are "
    "torch.cuda.max_memory_allocated over the first timed repeat (NCCL's own buffers are not "
    "included)."
)
DP_ON_CPU = Said(
    "DDP against DataParallel cannot be tested on the CPU",
    "On the CPU DataParallel is a pass-through (it is the single-process run), so the "
    "guide's comparison needs GPUs. Each DDP process holds the parameters, gradients, "
    "optimizer state and DDP's bucket buffers (about one more copy of the gradients).",
)
NO_DP_PAIR = Said(
    "no dp and ddp run of the same size",
    "Run dp and ddp at the same world size (--strategies single,dp,ddp) to compare them.",
)
NO_FSDP_PAIR = Said(
    "no ddp run of a sharded run's world size",
    "Run ddp and fsdp at the same world size (--strategies single,ddp,fsdp) to compare "
    "their peaks per process.",
)
DP_EXPLANATION = (
    "DataParallel keeps the parameters, gradients, optimizer state and the gathered outputs "
    "on device 0; each DDP process holds parameters, gradients, optimizer state and bucket "
    "buffers on its own GPU. The ratio compares the busiest device of each run."
)
FSDP_EXPLANATION = (
    "FSDP shards the parameters, gradients and optimizer state: each of W processes keeps 1/W "
    "of them and all-gathers a unit's parameters only around its forward and backward (PyTorch's "
    "FSDP documentation; ZeRO stage 3, Rajbhandari et al. 2020), while each DDP process keeps "
    "whole copies plus its gradient buckets. Activations are the same in both (the same rows per "
    "process). FSDP's peak per process should therefore be below DDP's: the check passes when "
    "it is, comparing the busiest process of each run at the same world size."
)
FSDP_NO_SAVING = (
    " Here it was not: what sharding saved was less than what FSDP's gathered units cost. The "
    "saving grows with the share of memory the model state takes."
)


def memory(f: MemoryFinding) -> Said:
    dp = DP_ON_CPU if f.dp == "cpu" else NO_DP_PAIR if isinstance(f.dp, str) else _dp(f.dp)
    parts = [(isinstance(f.dp, str), dp)]
    if f.fsdp is not None:
        fsdp = NO_FSDP_PAIR if isinstance(f.fsdp, str) else _fsdp(f.fsdp)
        parts.append((isinstance(f.fsdp, str), fsdp))
    said = [s for unmeasured, s in parts if not unmeasured]
    said += [s for unmeasured, s in parts if unmeasured]  # what was measured first
    peaks = ", ".join(f"{r.label} {mib(peak(r))}" for r in f.runs)
    opening = "" if f.status != "skip" else f"busiest device: {peaks}; "
    return Said(
        opening + "; ".join(s.summary for s in said),
        " ".join(s.explanation for s in said) + " " + WINDOW,
    )


def _dp(p: DpVsDdp) -> Said:
    skew = (
        ""
        if p.imbalance is None
        else f"; DataParallel's device 0 holds {p.imbalance:.2f}× the rest"
    )
    return Said(
        f"peak per device: {p.ddp.label} / {p.dp.label} = {p.ratio:.2f}: the guide's "
        f"'≈ 50 % less' {'held' if p.held else 'did not hold'} here{skew}",
        DP_EXPLANATION,
    )


def _fsdp(p: FsdpVsDdp) -> Said:
    verdict = (
        "needed less than DDP"
        if p.held
        else "no measurable difference from DDP"
        if p.close
        else "did not need less than DDP"
    )
    fsdp, ddp = p.fsdp, p.ddp
    return Said(
        f"peak per process: {fsdp.label} {mib(peak(fsdp))}, {ddp.label} {mib(peak(ddp))} "
        f"({fsdp.label} / {ddp.label} = {p.ratio:.3f}): FSDP " + verdict,
        FSDP_EXPLANATION
        + _most_saved(p.gradients, fsdp.world_size)
        + ("" if p.held or p.close else FSDP_NO_SAVING)
        + (_close(p.gradients) if p.close else ""),
    )


def _most_saved(gradients: int | None, w: int) -> str:
    """The most sharding can save per process, from the trainable parameter bytes."""
    if not gradients:
        return ""
    return (
        f" Here the trainable parameters take {mib(gradients)}: over {w} processes sharding saves "
        f"at most {mib(gradients * (1 - 1 / w))} for each of the parameters, the gradients and "
        "each optimizer state per parameter."
    )


def _close(gradients: int | None) -> str:
    """The two peaks differ by less than one copy of the gradients."""
    return (
        f" The two peaks differ by less than one copy of the gradients ({mib(gradients)}), about "
        "what a run's own CPU peak varies between runs and ranks (which of gloo's asynchronous "
        "buffers are alive at the peak): read this as no measurable difference on this model."
    )


# --- communication -------------------------------------------------------------------------------

SHARDED_NOTE = (
    " Not judged here (the guide's claim is DDP's): a sharded run all-gathers each unit's "
    "parameters around its forward and backward and reduce-scatters its gradients; the bytes "
    "are those of the unsharded tensors. On gloo a reduce-scatter runs as an all-reduce."
)
PROFILED = (
    "torch.profiler recorded the collectives of a few steady steps (traces open in Perfetto). "
    "DDP all-reduces gradient buckets during backward, overlapping the rest of backward; the "
    "exposed part is the time a synchronised step takes beyond the same step under no_sync, "
    f"measured by alternating the two. Communication counts as hidden below "
    f"{pct(EXPOSED_SHARE_LIMIT)} of the step. "
)
STALLS = (
    "Here it stalls the step: fewer, larger steps (bigger batch or --accum-steps with "
    "no_sync) amortise it."
)


def communication(f: CommunicationFinding) -> Said:
    shards = "".join(sharded_collectives(r) for r in f.sharded)
    if shards:  # the bytes are the unsharded tensors each kind of collective handled
        shards = SHARDED_NOTE + shards
    if f.top is None:
        return Said(
            "no DDP run with two or more processes to profile",
            "Include ddp at a world size of 2 or more to profile its collectives; a one-process "
            "group has nothing to exchange." + shards,
        )
    c = profile(f.top)
    exposed = (
        f"{pct(c['exposed_share'])} of the step is communication not hidden behind compute"
        if c.get("exposed_share") is not None
        else "the share not hidden behind compute is not measured in a script's own loop"
    )
    return Said(
        f"{f.top.label}: {mib(c['bytes_all_reduced_per_step'])} all-reduced per step for "
        f"{mib(c['gradient_bytes'])} of gradients; {exposed}",
        PROFILED + (STALLS if f.stalled else "") + shards,
    )


def sharded_collectives(r: Run) -> str:
    """One sentence on a sharded run's collectives per step (FSDP: all-gather, reduce-scatter)."""
    c = profile(r)
    ops = {o["op"]: o for o in c.get("collectives", ())}
    said = [
        f"{ops[op]['count_per_step']:.1f} {words} ({mib(c.get(key))}, "
        f"{ops[op]['ms_per_step']:.2f} ms)"
        for op, words, key in (
            ("all_gather", "all-gathers", "bytes_all_gathered_per_step"),
            ("reduce_scatter", "reduce-scatters", "bytes_reduce_scattered_per_step"),
        )
        if op in ops
    ]
    if not said:
        return ""
    return f" {r.label} per step: {' and '.join(said)}."
