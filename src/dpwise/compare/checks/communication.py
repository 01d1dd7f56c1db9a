"""Check 4, communication: collectives per step, bytes against gradients, exposed time (DDP's;
FSDP's all-gathers and reduce-scatters are said beside it, not judged).

What it finds is data (a CommunicationFinding); checks/text.py says it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from dpwise.compare.checks.base import CheckContext, Finding
from dpwise.compare.checks.thresholds import BYTES_TOLERANCE, EXPOSED_SHARE_LIMIT
from dpwise.infra.units import mib, pct
from dpwise.results.filters import one_process_per_device, sharded
from dpwise.results.records import Json, Run, Table
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


@dataclass(frozen=True, kw_only=True)
class CommunicationFinding(Finding):
    top: Run | None  # the ddp run of the largest world size profiled (None: none)
    full: bool  # it all-reduced every gradient byte (within the tolerance)
    stalled: bool  # its exposed share stalls the step
    sharded: tuple[Run, ...]  # sharded runs of two or more processes: said, not judged


def profile(run: Run) -> Json:
    """The run's profile of its collectives (empty where none was recorded)."""
    return run.communication or {}


def find(ctx: CheckContext) -> CommunicationFinding:
    grouped = [r for r in ctx.runs if traits(r.strategy).process_group and r.communication]
    # the verdict and table are DDP's (the guide's claim); a sharded run's collectives are said
    ddp = one_process_per_device(grouped)
    # a user's script is profiled without the paired steps that measure the exposed share
    measured = [r for r in ddp if r.world_size > 1 and "bytes_all_reduced_per_step" in profile(r)]
    table: Table = {"columns": COLUMNS, "rows": [_row(r) for r in ddp]}
    shards = tuple(r for r in sharded(grouped) if r.world_size > 1)
    if not measured:
        return CommunicationFinding(
            status="skip",
            figures={},
            table=table,
            plot=None,
            top=None,
            full=False,
            stalled=False,
            sharded=shards,
        )
    top = max(measured, key=lambda r: r.world_size)
    c = profile(top)
    gradients = c["gradient_bytes"]
    full = abs(c["bytes_all_reduced_per_step"] - gradients) <= BYTES_TOLERANCE * gradients
    heavy = c.get("exposed_share") is not None and stalled(c["exposed_share"])
    return CommunicationFinding(
        status="warn" if heavy or not full else "pass",
        figures={r.id: r.communication for r in measured},
        table=table,
        plot="communication.png",
        top=top,
        full=full,
        stalled=heavy,
        sharded=shards,
    )


def _row(r: Run) -> list[str]:
    c = profile(r)
    if r.world_size == 1:
        return [r.label, ONE_PROCESS, "–", "–", mib(c["gradient_bytes"]), "–", "–", "–"]
    ops: dict[str, Any] = {o["op"]: o for o in c["collectives"]}
    return [
        r.label,
        f"{ops['all_reduce']['count_per_step']:.1f}",
        f"{ops['all_reduce']['ms_per_step']:.2f}",
        mib(c["bytes_all_reduced_per_step"]),
        mib(c["gradient_bytes"]),
        "–" if c.get("exposed_ms") is None else f"{c['exposed_ms']:.2f}",
        "–" if c.get("exposed_share") is None else pct(c["exposed_share"]),
        "–" if r.sync_points_per_step is None else f"{r.sync_points_per_step:.1f}",
    ]
