"""Check 4, communication: collectives per step, bytes against gradients, exposed time (DDP's;
FSDP's all-gathers and reduce-scatters are said beside it, not judged)."""

from __future__ import annotations

from dpwise.compare.checks.base import Check, CheckContext
from dpwise.compare.checks.thresholds import BYTES_TOLERANCE, EXPOSED_SHARE_LIMIT
from dpwise.infra.units import mib, pct
from dpwise.results.filters import one_process_per_device, sharded
from dpwise.results.records import CheckResult, Run
from dpwise.strategies import traits

NAME = "communication"

ONE_PROCESS = "one process: nothing to exchange"
COLUMNS = [
    "run",
    "all-reduce/step",
    "all-reduce ms/step",
    "all-reduced/step",
    "gradients",
    "exposed ms/step",
    "exposed share",
    "sync points/step",
]


def stalled(share: float) -> bool:
    """The one rule for 'gradient sync stalls the step', shared by this check and the claims."""
    return share >= EXPOSED_SHARE_LIMIT


def _row(r: Run) -> list[str]:
    c = r.communication
    if r.world_size == 1:
        return [r.label, ONE_PROCESS, "–", "–", mib(c["gradient_bytes"]), "–", "–", "–"]
    ops = {o["op"]: o for o in c["collectives"]}
    return [
        r.label,
        f"{ops['all_reduce']['count_per_step']:.1f}",
        f"{ops['all_reduce']['ms_per_step']:.2f}",
        mib(c["bytes_all_reduced_per_step"]),
        mib(c["gradient_bytes"]),
        f"{c['exposed_ms']:.2f}",
        pct(c["exposed_share"]),
        "–" if r.sync_points_per_step is None else f"{r.sync_points_per_step:.1f}",
    ]


SHARDED_NOTE = (
    " Not judged here (the guide's claim is DDP's): a sharded run all-gathers each unit's "
    "parameters around its forward and backward and reduce-scatters its gradients; the bytes "
    "are those of the unsharded tensors. On gloo a reduce-scatter runs as an all-reduce."
)


def sharded_collectives(r: Run) -> str:
    """One sentence on a sharded run's collectives per step (FSDP: all-gather, reduce-scatter)."""
    c = r.communication or {}
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


def evaluate(ctx: CheckContext) -> CheckResult:
    grouped = [r for r in ctx.runs if traits(r.strategy).process_group and r.communication]
    # the verdict and table are DDP's (the guide's claim); a sharded run's collectives are said
    ddp = one_process_per_device(grouped)
    measured = [r for r in ddp if r.world_size > 1 and "exposed_share" in r.communication]
    table = {"columns": COLUMNS, "rows": [_row(r) for r in ddp]}
    shards = "".join(sharded_collectives(r) for r in sharded(grouped) if r.world_size > 1)
    if shards:  # the bytes are the unsharded tensors each kind of collective handled
        shards = SHARDED_NOTE + shards
    if not measured:
        return CheckResult(
            NAME,
            "skip",
            "no DDP run with two or more processes to profile",
            "Include ddp at a world size of 2 or more to profile its collectives; a one-process "
            "group has nothing to exchange." + shards,
            {},
            table,
            None,
        )
    top = max(measured, key=lambda r: r.world_size)
    c = top.communication
    full = abs(c["bytes_all_reduced_per_step"] - c["gradient_bytes"]) <= (
        BYTES_TOLERANCE * c["gradient_bytes"]
    )
    heavy = stalled(c["exposed_share"])
    return CheckResult(
        NAME,
        "warn" if heavy or not full else "pass",
        f"{top.label}: {mib(c['bytes_all_reduced_per_step'])} all-reduced per step for "
        f"{mib(c['gradient_bytes'])} of gradients; {pct(c['exposed_share'])} of the step is "
        "communication not hidden behind compute",
        "torch.profiler recorded the collectives of a few steady steps (traces open in Perfetto). "
        "DDP all-reduces gradient buckets during backward, overlapping the rest of backward; the "
        "exposed part is the time a synchronised step takes beyond the same step under no_sync, "
        f"measured by alternating the two. Communication counts as hidden below "
        f"{pct(EXPOSED_SHARE_LIMIT)} of the step. "
        + (
            "Here it stalls the step: fewer, larger steps (bigger batch or --accum-steps with "
            "no_sync) amortise it."
            if heavy
            else ""
        )
        + shards,
        {r.id: r.communication for r in measured},
        table,
        "communication.png",
    )


COMMUNICATION = Check(NAME, evaluate)
