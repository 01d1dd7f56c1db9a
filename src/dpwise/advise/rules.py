"""`dpwise advise`: facts + memory estimates (+ measurements) in, a Recommendation out.

The rules reproduce the guide's decision matrix where it holds and correct it where it does not
(see the guide's fact-check): DataParallel is not deprecated, but PyTorch recommends DDP; "only DDP
is multi-node" ignores FSDP; the matrix has no answer for a model that does not fit one device.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, TypedDict

from dpwise.advise import kinds
from dpwise.advise.facts import Fact
from dpwise.infra.units import size
from dpwise.strategies import traits

# The decision matrix's answers: the rules recommend strategies by name (the name is the answer);
# what follows from an answer (its world size, launch line and memory model) comes from its
# traits (dpwise.advise.kinds), as for any strategy registered.
SINGLE, DP, DDP, FSDP = "single", "dp", "ddp", "fsdp"
HEADROOM = 0.9  # a device is "full" at 90 % of its memory: allocator fragmentation, CUDA context
LARGE_SHARE = 0.5  # a model whose single-device peak exceeds half the device is "large"


class RecommendationFields(TypedDict):
    strategy: str
    rule: str
    reasons: list[str]
    runner_up: str | None
    changes: list[str]
    launch: list[str]
    world_size: int
    measurement_status: str | None
    inconclusive_reason: str | None
    warnings: list[str]


@dataclass
class Recommendation:
    strategy: str
    rule: str
    reasons: list[str]
    runner_up: str | None
    changes: list[str]  # what would change the answer
    launch: list[str] = field(default_factory=list)
    world_size: int = 1
    measurement_status: str | None = None  # with --from: "recommended" or "inconclusive"
    inconclusive_reason: str | None = None
    warnings: list[str] = field(default_factory=list)  # what the measured run got wrong

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def answer(self) -> RecommendationFields:
        """Its fields, as the start of advise's answer."""
        return RecommendationFields(
            strategy=self.strategy,
            rule=self.rule,
            reasons=[*self.reasons],
            runner_up=self.runner_up,
            changes=[*self.changes],
            launch=[*self.launch],
            world_size=self.world_size,
            measurement_status=self.measurement_status,
            inconclusive_reason=self.inconclusive_reason,
            warnings=[*self.warnings],
        )


@dataclass(frozen=True)
class Situation:
    gpus: int
    nodes: int
    device_bytes: float
    goal: str
    peaks: dict[str, int] | None  # strategy → estimated peak bytes per device (None: unknown)
    # strategy → breakdown of its busiest device (the estimate's parts), when known
    breakdowns: dict[str, dict[str, int]] | None = None
    workload_args: tuple[str, ...] = ()  # the user's workload as `dpwise train` flags
    # strategy → why it cannot run this model (never recommended, never runner-up)
    refused: dict[str, str] = field(default_factory=dict)
    # flags a launch line of a strategy that takes them needs for this model
    # (--find-unused-parameters where running the model left parameters without gradient)
    model_flags: tuple[str, ...] = ()


def situation(
    facts: dict[str, Fact],
    peaks: dict[str, int] | None,
    breakdowns: dict[str, dict[str, int]] | None = None,
    workload_args: tuple[str, ...] = (),
    refused: dict[str, str] | None = None,
    model_flags: tuple[str, ...] = (),
) -> Situation:
    return Situation(
        refused=dict(refused or {}),
        model_flags=model_flags,
        gpus=int(facts["gpus"].value),
        nodes=int(facts["nodes"].value),
        device_bytes=float(facts["device_memory_gib"].value) * 1024**3,
        goal=str(facts["goal"].value),
        peaks=peaks,
        breakdowns=breakdowns,
        workload_args=workload_args,
    )


def launch_commands(
    strategy: str,
    gpus: int,
    nodes: int,
    workload: tuple[str, ...] = (),
    model_flags: tuple[str, ...] = (),
) -> list[str]:
    """Your own script's launch line, then dpwise's for the same workload (flags shell-quoted).

    A strategy with a process per device starts them with torchrun (your script) or dpwise's own
    launcher (``--nproc`` per node, a rendezvous across nodes); a one-process strategy with python.
    ``model_flags`` (e.g. --find-unused-parameters) join the line of a strategy that takes them.
    """
    options = {"--" + o.replace("_", "-") for o in traits(strategy).options}
    workload = (*workload, *(f for f in model_flags if f in options))
    tail = f" {shlex.join(workload)}" if workload else ""
    hint = kinds.script_hint(strategy)
    if not traits(strategy).multiprocess:
        return [f"python train.py{hint}", f"dpwise train --strategy {strategy}{tail}"]
    multi = f" --nnodes {nodes} --rdzv-backend c10d --rdzv-endpoint HOST:29400" if nodes > 1 else ""
    dpwise = f" --nnodes {nodes} --rdzv-endpoint HOST:29400" if nodes > 1 else ""
    per_node = max(gpus, 1)
    return [
        f"torchrun --nproc_per_node {per_node}{multi} train.py{hint}",
        f"dpwise train --strategy {strategy} --nproc {per_node}{dpwise}{tail}",
    ]


def _fits(s: Situation, strategy: str) -> bool:
    return s.peaks is None or s.peaks[strategy] <= HEADROOM * s.device_bytes


def _rec(strategy: str, rule: str, s: Situation, reasons, runner_up, changes) -> Recommendation:
    world = kinds.devices(strategy, max(1, s.gpus) * s.nodes, max(1, s.gpus))
    return Recommendation(
        strategy,
        rule,
        reasons,
        runner_up,
        changes,
        launch_commands(strategy, s.gpus, s.nodes, s.workload_args, s.model_flags),
        world,
    )


def _peak_text(s: Situation, strategy: str) -> str:
    if s.peaks is None:
        return "unknown (give --model to estimate it)"
    return f"{size(s.peaks[strategy])} of {size(s.device_bytes)}"


def dp_device0_text(s: Situation) -> str:
    """DataParallel's device 0 against ddp's per-device peak, from the estimate's own numbers."""
    if s.peaks is None:
        return (
            "DataParallel scatters each batch from device 0, gathers the outputs there and "
            "reduces the gradients onto it; give --model to compare its memory with ddp's"
        )
    dp, ddp = s.peaks[DP], s.peaks[DDP]
    parts = s.breakdowns or {}
    batch = sum(
        parts.get(DP, {}).get(k, 0) for k in ("dp_full_batch_inputs", "dp_gathered_outputs")
    )
    buckets = parts.get(DDP, {}).get("ddp_buckets", 0)
    if dp > ddp:
        return (
            f"DataParallel's device 0 needs {size(dp)}, more than ddp's {size(ddp)} per device "
            f"(of {size(s.device_bytes)}): "
            f"besides a full replica and the optimizer it holds the whole batch's inputs and "
            f"gathered outputs ({size(batch)}), more than ddp's bucket copy of the gradients "
            f"({size(buckets)})"
        )
    return (
        f"DataParallel's device 0 needs {size(dp)}, no more than ddp's {size(ddp)} per device "
        f"(of {size(s.device_bytes)}): "
        f"ddp keeps a bucket copy of the gradients ({size(buckets)}) on every device, at least "
        f"what dp's device 0 adds for the whole batch's inputs and gathered outputs "
        f"({size(batch)}); DataParallel's cost lies elsewhere: one Python process whose threads "
        "drive every GPU, and the scatter, gather and gradient reduction on device 0 every step"
    )


def decide(s: Situation) -> Recommendation:
    """The rules, in order; the first that applies answers. A strategy that cannot run the model
    (``s.refused``) is then neither the answer nor the runner-up."""
    for rule in (_cpu_only, _too_big, _multi_node, _one_gpu, _many_gpus, _large, _prototype):
        answer = rule(s)
        if answer is not None:
            return _runnable(answer, s)
    return _runnable(_production(s), s)


def _runnable(rec: Recommendation, s: Situation) -> Recommendation:
    if rec.strategy in s.refused:
        instead = next(
            (c for c in (rec.runner_up, DDP, SINGLE) if c is not None and c not in s.refused),
            SINGLE,
        )
        why = f"{rec.strategy} would be the answer, but cannot run this model: "
        reasons = [why + s.refused[rec.strategy], f"{instead} is the next that can"]
        rec = _rec(instead, f"{rec.rule}+model", s, reasons, None, rec.changes)
    if rec.runner_up in s.refused:
        rec.reasons.append(f"{rec.runner_up} is not offered: {s.refused[rec.runner_up]}")
        rec.runner_up = None
    return rec


def _cpu_only(s: Situation) -> Recommendation | None:
    if s.gpus > 0:
        return None
    return _rec(
        SINGLE,
        "cpu-only",
        s,
        [
            "no GPU: DataParallel falls back to calling the model directly (a pass-through)",
            "one process uses every CPU core; DDP processes on one CPU split the same cores and "
            "add gloo communication (measure it with dpwise compare)",
        ],
        DDP,
        [
            "a GPU: with two or more dpwise recommends ddp (nccl)",
            "ddp with gloo on the CPU is right to test multi-process code before a GPU job",
        ],
    )


def _too_big(s: Situation) -> Recommendation | None:
    """The data-parallel candidate (single on one device, else ddp) does not fit its device."""
    world = max(s.gpus, 1) * s.nodes
    candidate = SINGLE if world == 1 else DDP
    if s.peaks is None or _fits(s, candidate):
        return None
    remedies = "use activation checkpointing, a smaller batch, bf16, or CPU offload"
    need = (
        f"devices with at least {size(s.peaks[candidate] / HEADROOM)} each would allow {candidate}"
    )
    if world == 1:
        return _rec(
            SINGLE,
            "model-does-not-fit-one-gpu",
            s,
            [
                f"one device needs {_peak_text(s, 'single')} (limit {int(HEADROOM * 100)} %): the "
                "model does not fit and there is no second device to shard over",
                f"add GPUs (then fsdp), or {remedies}",
            ],
            None,
            [need, "two or more GPUs → fsdp"],
        )
    reasons = [
        f"{candidate} needs {_peak_text(s, candidate)} per device (limit "
        f"{int(HEADROOM * 100)} %): dp and ddp keep a full copy of the model states on every "
        "device",
        f"fsdp shards parameters, gradients and optimizer state over {world} devices: "
        f"{_peak_text(s, 'fsdp')} each",
    ]
    if not _fits(s, FSDP):
        reasons.append(f"even sharded it does not fit: add GPUs, or {remedies}")
    return _rec(FSDP, "model-does-not-fit", s, reasons, None, [need])


def _multi_node(s: Situation) -> Recommendation | None:
    if s.nodes <= 1:
        return None
    return _rec(
        DDP,
        "multi-node",
        s,
        [
            f"{s.nodes} nodes: DataParallel is one process on one machine; DDP (or FSDP) spans "
            "nodes through torchrun's c10d rendezvous",
            f"per device: {_peak_text(s, 'ddp')}",
        ],
        FSDP,
        ["a model that does not fit one device → fsdp", "one node → the single-node rules"],
    )


def _one_gpu(s: Situation) -> Recommendation | None:
    if s.gpus != 1 or s.nodes > 1:
        return None
    return _rec(
        SINGLE,
        "single-gpu",
        s,
        ["one GPU: there is nothing to parallelise over", f"per device: {_peak_text(s, 'single')}"],
        None,
        ["a second GPU → ddp"],
    )


def _many_gpus(s: Situation) -> Recommendation | None:
    if s.gpus < 4:
        return None
    return _rec(
        DDP,
        "single-node-4-plus-gpus",
        s,
        [
            f"{s.gpus} GPUs: the guide's matrix says DDP above 4 GPUs and is silent at exactly 4; "
            "dpwise uses DDP from 4 on",
            dp_device0_text(s),
        ],
        FSDP,
        ["a model that does not fit one device → fsdp"],
    )


def _large(s: Situation) -> Recommendation | None:
    if s.peaks is None or s.peaks[SINGLE] <= LARGE_SHARE * s.device_bytes:
        return None
    return _rec(
        DDP,
        "large-model",
        s,
        [
            f"the model takes {_peak_text(s, 'single')} of one device (over half)",
            dp_device0_text(s),
            f"ddp needs {_peak_text(s, 'ddp')} on every device, evenly",
        ],
        FSDP,
        ["a smaller model (under half a device) and --goal prototype → dp is acceptable"],
    )


def _prototype(s: Situation) -> Recommendation | None:
    if s.goal != "prototype" or not _fits(s, DP):
        return None
    return _rec(
        DP,
        "prototype-few-gpus",
        s,
        [
            f"{s.gpus} GPUs, a small model and a quick experiment: nn.DataParallel is one line "
            "and needs no launcher (the guide's matrix holds here)",
            "DataParallel is not deprecated, but PyTorch recommends DDP; move to ddp for "
            "production runs",
        ],
        DDP,
        ["--goal production, 4 or more GPUs, or a model over half a device → ddp"],
    )


def _production(s: Situation) -> Recommendation:
    return _rec(
        DDP,
        "production-few-gpus",
        s,
        [
            f"{s.gpus} GPUs for production: the guide's matrix says DataParallel below 4 GPUs; "
            "dpwise corrects it to DDP, which PyTorch recommends even on one node",
            "DDP runs a process per GPU (no GIL contention) and overlaps the gradient all-reduce "
            "with backward",
            dp_device0_text(s),
        ],
        DP,
        [
            "--goal prototype → dp is acceptable for quick experiments",
            "measure both on your machine: dpwise compare, then dpwise advise --from results.json",
        ],
    )
