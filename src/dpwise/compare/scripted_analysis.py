"""The analysis step of `dpwise compare --script`: from the scripts' runs to the results document
compare writes for its own loop (the same checks, verdict and claims), the runs named after the
scripts. The parameters are the optimizer's, in its order (a script's model is never built
here: only its runs know it); what in the model makes parallel runs differ (BatchNorm, random
layers) is what the reference script's rank 0 found while it trained (dpwise.userscript.causes).
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timezone
from itertools import product
from pathlib import Path
from typing import Any

import torch

from dpwise import __version__
from dpwise.compare import checks
from dpwise.compare.analysis import environment
from dpwise.compare.checks import CHECKS, CheckContext
from dpwise.compare.claims import claims
from dpwise.compare.scripted import WARM_UP_STEPS, ScriptRun
from dpwise.compare.verdict import recommend
from dpwise.diagnosis.layers import Layer
from dpwise.infra.hardware import Hardware
from dpwise.measure import agreement
from dpwise.results.document import Results
from dpwise.results.filters import one_process_many_devices, one_process_per_device
from dpwise.results.records import Run


def _state(out: Path, run: Run) -> dict[str, torch.Tensor]:
    assert run.final_state is not None  # every measured run saved its final parameters
    return torch.load(out / run.final_state, map_location="cpu", weights_only=True)


def derive(out: Path, runs: list[Run], tolerance: float) -> tuple[list[Run], float | None]:
    """The runs with speed-up and parameter difference against the first, and the worst
    DataParallel ↔ DDP parameter difference (None without both)."""
    states = {r.id: _state(out, r) for r in runs}
    reference = states[runs[0].id]
    names = list(reference)
    base = runs[0].median_rate
    derived = []
    for r in runs:
        p = agreement.gap(reference, states[r.id], names, tolerance)
        derived.append(
            replace(
                r,
                speedup_vs_single=r.median_rate / base if base else None,
                max_param_diff_vs_single=p.max,
                diff_vs_single={"parameters": p.to_json(), "buffers": None},
            )
        )
    dps = [r.id for r in one_process_many_devices(runs)]
    ddps = [r.id for r in one_process_per_device(runs)]
    pairs = [
        agreement.gap(states[a], states[b], names, tolerance).max for a, b in product(dps, ddps)
    ]
    return derived, (max(pairs) if pairs else None)


def diagnose(causes: dict[str, Any] | None) -> checks.Diagnosis:
    """BatchNorm and random layers as the reference script's rank 0 found them while training;
    the loss is the script's own (no cause is named from it)."""
    found = causes or {}
    layers = {k: [Layer(d["name"], d["kind"]) for d in found.get(k, [])] for k in
              ("batchnorm", "stochastic")}  # fmt: skip
    skipped = None if found.get("found_by", "running") == "running" else "found by class name"
    return checks.Diagnosis(
        layers["batchnorm"], layers["stochastic"], "mean", probe_skipped=skipped
    )


def assemble(
    out: Path,
    runs: list[Run],
    specs: list[ScriptRun],
    causes: dict[str, Any] | None,
    settings: dict[str, Any],
    command: str,
) -> Results:
    hw = Hardware.detect()
    device_type = "cuda" if any(d.startswith("cuda") for d in runs[0].devices) else "cpu"
    tolerance = settings["tolerance"]
    runs, dp_vs_ddp = derive(out, runs, tolerance)
    why = diagnose(causes)
    ctx = CheckContext(
        runs=tuple(runs),
        tolerance=tolerance,
        diagnosis=why,
        device_type=device_type,
        repeats=settings["repeats"],
        cpu_cores=hw.cpu_cores,
    )
    outcomes = {check: check(ctx) for check in CHECKS}
    said = findings(runs)
    unlike = [line for line in said if NOT_THE_SAME in line]
    for check, result in outcomes.items():  # parameters of other computations are not compared
        if check.name == "convergence" and unlike:
            outcomes[check] = replace(result, status="skip", summary=unlike[0],
                                      explanation=" ".join(unlike))  # fmt: skip
    env = environment(hw, device_type, "nccl" if device_type == "cuda" else "gloo")
    verdict = recommend(runs, tolerance, device_type, why.known_cause)
    verdict = replace(verdict, reasons=(*said, *verdict.reasons))
    return Results(
        dpwise_version=__version__,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command,
        workload={**workload_facts(specs, settings), "findings": said},
        environment=env,
        runs=tuple(runs),
        checks=tuple(outcomes.values()),
        recommendation=verdict.to_json(),
        claims=tuple(c.to_json() for c in claims(runs, outcomes, env, dp_vs_ddp)),
        projection={"status": "absent", "reason": NOT_PROJECTED},
    )


NOT_THE_SAME = "not the same computation"
NOT_PROJECTED = (
    "your scripts are measured, not modelled: the projection needs the exposed communication of "
    "compare's own loop"
)


def findings(runs: list[Run]) -> list[str]:
    """What only a run shows: a rank that trained the rows every other rank trained, a run that
    feeds its model another number of rows per optimizer step than the first, and one that
    feeds it as many rows but other ones (a data order that is not the sampler's)."""
    ref = runs[0].script or {}
    said = []
    for r in runs:
        f = r.script or {}
        if f.get("same_rows_on_every_rank"):
            ranks = f["rows_per_rank"]
            where = f" ({f['loader']})" if f.get("loader") else ""
            said.append(
                f"{r.label}: every rank trained the same rows at every step (their digests are "
                f"equal): its {f['rows_per_step']} rows per step are {ranks[0]} rows trained "
                f"{len(ranks)} times, and its samples/s counts each of them {len(ranks)} "
                f"times{where}"
            )
        if r is runs[0]:
            continue
        if f.get("rows_per_step") != ref.get("rows_per_step"):
            said.append(
                f"{r.label} feeds its model {f.get('rows_per_step')} rows per optimizer step, "
                f"{runs[0].label} {ref.get('rows_per_step')}: a different global batch, "
                f"{NOT_THE_SAME}; give both the same global batch to compare their parameters"
            )
        elif f.get("same_rows_on_every_rank") or ref.get("same_rows_on_every_rank"):
            continue  # said above: other rows, for a reason already named
        elif (step := _first_other_rows(ref.get("row_sets"), f.get("row_sets"))) is not None:
            said.append(_other_rows(r.label, runs[0].label, step, len(f["row_sets"])))
    return said


def _first_other_rows(ref: list[str] | None, run: list[str] | None) -> int | None:
    """The first optimizer step (from 1) at which the two runs' global batches differ."""
    if not ref or not run:
        return None
    return next((i + 1 for i, (a, b) in enumerate(zip(ref, run, strict=False)) if a != b), None)


def _other_rows(label: str, ref: str, step: int, steps: int) -> str:
    return (
        f"{label} fed its model other rows than {ref} at optimizer step {step} (of the first "
        f"{steps}, compared: as many rows per step, other ones): a data order that is not the "
        f"sampler's, {NOT_THE_SAME}. dpwise holds a RandomSampler's order equal to a "
        f"DistributedSampler's; rows a script picks itself (its own shuffle, random indices, a "
        f"seed per rank, random augmentation) are not held equal. Feed both through a DataLoader "
        f"with a sampler, or the same draws, to compare their parameters"
    )


def workload_facts(specs: list[ScriptRun], settings: dict[str, Any]) -> dict[str, Any]:
    """The scripts as their users launch them, and what was held equal."""
    scripts = {s.command.given: s.launch.kind for s in specs}
    return {
        "scripts": scripts,
        "steps": WARM_UP_STEPS + settings["steps"],
        "warm_up_steps": WARM_UP_STEPS,
        "repeats": settings["repeats"],
        "seed": settings["seed"],
        "tolerance": settings["tolerance"],
    }
