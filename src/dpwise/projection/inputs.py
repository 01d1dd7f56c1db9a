"""What the projection reads from a comparison's results.json: a ddp run at two or more
processes (its no-sync step, gradient bytes and bucket launches), an fsdp run if there is one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.projection.model import Bucket, Inputs, Sharded
from dpwise.results.document import Results
from dpwise.results.filters import one_process_per_device, sharded
from dpwise.results.records import Run


class NoInputs(DpwiseError):
    """The results hold nothing to project from; the message says why."""


def _ddp_run(runs: list[Run]) -> Run:
    candidates = [r for r in one_process_per_device(runs) if r.world_size >= 2]
    if not candidates:
        raise NoInputs(
            "no ddp run at 2 or more processes in these results: nothing to read DDP's gradient "
            "buckets from (run compare with ddp at world size 2 or more)"
        )
    run = max(candidates, key=lambda r: r.world_size)
    comm = run.communication or {}
    if not comm.get("buckets") or comm.get("step_ms_without_sync") is None:
        raise NoInputs(
            f"the run {run.id} recorded no gradient buckets or no step without sync (results of "
            "an older dpwise?): run dpwise compare again"
        )
    return run


def _sharded(runs: list[Run]) -> Sharded | None:
    found = [r for r in sharded(runs) if r.world_size >= 2 and r.communication]
    if not found:
        return None
    run = max(found, key=lambda r: r.world_size)
    comm = run.communication or {}
    counts = {c.get("op"): c.get("count_per_step", 0.0) for c in comm.get("collectives", [])}
    return Sharded(
        run=run.id,
        gathered_bytes=float(comm.get("bytes_all_gathered_per_step") or 0.0),
        gathers=float(counts.get("all_gather") or 0.0),
        scattered_bytes=float(comm.get("bytes_reduce_scattered_per_step") or 0.0),
        scatters=float(counts.get("reduce_scatter") or 0.0),
    )


def inputs_from_results(document: Mapping[str, Any] | Results) -> Inputs:
    """The projection's inputs from a results.json's content (or a Results); NoInputs if none."""
    results = document if isinstance(document, Results) else Results.from_json(document)
    runs = list(results.runs)
    run = _ddp_run(runs)
    comm = run.communication or {}
    batch = int(results.workload.get("batch_size") or 0)
    return Inputs(
        run=run.id,
        measured_world=run.world_size,
        compute_ms=float(comm["step_ms_without_sync"]),
        per_device_batch=batch // run.world_size,
        gradient_bytes=int(comm.get("gradient_bytes") or 0),
        buckets=tuple(Bucket(int(b["bytes"]), float(b["ready_ms"])) for b in comm["buckets"]),
        measured_step_ms=comm.get("step_ms"),
        measured_exposed_ms=comm.get("exposed_ms"),
        device_type=str(results.environment.get("device_type") or "cpu"),
        sharded=_sharded(runs),
    )
