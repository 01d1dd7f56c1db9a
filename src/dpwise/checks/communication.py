"""Check 4, communication: collectives per step, bytes against gradients, exposed time."""

from __future__ import annotations

from dpwise.checks.base import CheckResult, Run
from dpwise.units import mib, pct


def communication(runs: list[Run]) -> CheckResult:
    measured = [r for r in runs if r["communication"] and "exposed_share" in r["communication"]]
    rows = []
    for r in measured:
        c = r["communication"]
        ops = {o["op"]: o for o in c["collectives"]}
        rows.append(
            [
                r["label"],
                f"{ops['all_reduce']['count_per_step']:.1f}",
                f"{ops['all_reduce']['ms_per_step']:.2f}",
                mib(c["bytes_all_reduced_per_step"]),
                mib(c["gradient_bytes"]),
                f"{c['exposed_ms']:.2f}",
                pct(c["exposed_share"]),
                "–"
                if r.get("sync_points_per_step") is None
                else f"{r['sync_points_per_step']:.1f}",
            ]
        )
    table = {
        "columns": [
            "run",
            "all-reduce/step",
            "all-reduce ms/step",
            "all-reduced/step",
            "gradients",
            "exposed ms/step",
            "exposed share",
            "sync points/step",
        ],
        "rows": rows,
    }
    if not measured:
        return CheckResult(
            "communication",
            "skip",
            "no DDP run to profile",
            "Include ddp in --strategies to profile its collectives.",
            {},
            table,
            None,
        )
    top = max(measured, key=lambda r: r["world_size"])
    c = top["communication"]
    full = abs(c["bytes_all_reduced_per_step"] - c["gradient_bytes"]) <= 0.05 * c["gradient_bytes"]
    heavy = c["exposed_share"] >= 0.5
    return CheckResult(
        "communication",
        "warn" if heavy or not full else "pass",
        f"{top['label']}: {mib(c['bytes_all_reduced_per_step'])} all-reduced per step for "
        f"{mib(c['gradient_bytes'])} of gradients; {pct(c['exposed_share'])} of the step is "
        "communication not hidden behind compute",
        "torch.profiler recorded the collectives of a few steady steps (traces open in Perfetto). "
        "DDP all-reduces gradient buckets during backward, overlapping the rest of backward; the "
        "exposed part is the time a synchronised step takes beyond the same step under no_sync, "
        "measured by alternating the two. "
        + (
            "Communication dominates the step here: fewer, larger steps (bigger batch or "
            "--accum-steps with no_sync) amortise it."
            if heavy
            else ""
        ),
        {r["id"]: r["communication"] for r in measured},
        table,
        "communication.png",
    )
