"""The analysis step of `dpwise compare`: from the measured runs to the results document
(schema 1): derived figures, the diagnosis, the checks, the verdict and the projection."""

from __future__ import annotations

import os
import platform
from dataclasses import replace
from datetime import datetime, timezone
from itertools import product
from pathlib import Path
from typing import Any

import torch
from torch import nn

from dpwise import __version__
from dpwise.compare import checks
from dpwise.compare.checks import CHECKS, CheckContext
from dpwise.compare.checks.contention import machine_load
from dpwise.compare.claims import claims
from dpwise.compare.settings import CompareConfig
from dpwise.compare.verdict import recommend
from dpwise.diagnosis import ModelProbe
from dpwise.diagnosis.layers import batchnorm_layers, dropout_layers
from dpwise.diagnosis.probe import MAX_PARAMETERS
from dpwise.infra.hardware import Hardware, gpu_names
from dpwise.measure import agreement
from dpwise.projection import section as projection
from dpwise.results.document import Results
from dpwise.results.filters import one_process_many_devices, one_process_per_device
from dpwise.results.records import Json, Run
from dpwise.strategies import traits
from dpwise.train.inspection import Inspection
from dpwise.workload.spec import BUILTINS, Workload


def _state(out: Path, run: Run) -> dict[str, torch.Tensor]:
    assert run.final_state is not None  # every measured run saved its final state
    return torch.load(out / run.final_state, map_location="cpu", weights_only=True)


def derive(
    out: Path, runs: list[Run], kinds: agreement.Kinds, tolerance: float
) -> tuple[list[Run], float | None, dict[str, dict[str, torch.Tensor]]]:
    """The runs with speed-up and parameter and buffer differences against single, the worst
    dp↔ddp parameter difference (None without a dp and a ddp run), and the final states."""
    reference = _state(out, runs[0])
    states = {r.id: _state(out, r) for r in runs}
    params, rest = kinds.split(reference)
    if not params:  # names the model did not give (a factory that builds another model)
        params, rest = list(reference), []
    base = runs[0].median_rate
    derived = []
    for r in runs:
        p = agreement.gap(reference, states[r.id], params, tolerance)
        b = agreement.gap(reference, states[r.id], rest, tolerance)
        derived.append(
            replace(
                r,
                speedup_vs_single=r.median_rate / base,
                max_param_diff_vs_single=p.max,
                max_buffer_diff_vs_single=b.max if rest else None,
                diff_vs_single={"parameters": p.to_json(), "buffers": b.to_json()},
            )
        )
    dps = [r.id for r in one_process_many_devices(runs)]
    ddps = [r.id for r in one_process_per_device(runs)]
    pairs = [
        agreement.gap(states[a], states[b], params, tolerance).max for a, b in product(dps, ddps)
    ]
    return derived, (max(pairs) if pairs else None), states


def untrained(
    workload: Workload,
    seed: int,
    kinds: agreement.Kinds,
    states: dict[str, dict[str, torch.Tensor]],
) -> agreement.Untrained | None:
    """The trainable parameters no run changed, against the initial state the runs built (the
    seed's); None where the model is too large to build once more here."""
    if sum(kinds.sizes.get(n, 0) for n in kinds.trainable) > MAX_PARAMETERS:
        return None
    torch.manual_seed(seed)  # as every run's loop does before it builds the model
    initial = workload.build_model().state_dict()
    return agreement.untrained(kinds, initial, states.values())


def diagnose(
    model: nn.Module,
    precision: str,
    probe: ModelProbe,
    ddp_options: dict[str, bool],
    still: agreement.Untrained | None = None,
) -> checks.Diagnosis:
    """What breaks equivalence: BatchNorm by class (on the meta-device model), random layers and
    unused parameters by running the model (the probe), Dropout by class where the probe could not
    run."""
    bn = batchnorm_layers(model)
    random_layers = probe.stochastic if probe.skipped is None else dropout_layers(model)
    dtypes = list(dict.fromkeys(agreement.dtype_name(p.dtype) for p in model.parameters()))
    return checks.Diagnosis(
        bn,
        random_layers,
        "mean",
        precision,
        probe.unused,
        ddp_options,
        probe.skipped,
        buffers=probe.buffers,
        untrained=still,
        param_dtypes=dtypes,
    )


def mark_ddp_options(runs: list[Run], options: dict[str, bool]) -> list[Run]:
    """The runs, each ddp run with what it passed to DistributedDataParallel."""
    return [
        replace(r, ddp_options=dict(options)) if options.keys() & traits(r.strategy).options else r
        for r in runs
    ]


def environment(hw: Hardware, device_type: str, backend: str) -> dict[str, Any]:
    return {
        "device_type": device_type,
        "gpus": hw.cuda_devices,
        "gpu_names": gpu_names(hw.cuda_devices),
        "cpu_cores": hw.cpu_cores,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "platform": platform.platform(),
        "backend": backend,
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
    }


def workload_facts(
    cfg: CompareConfig, workload: Workload, model: nn.Module, runs: list[Run]
) -> dict[str, Any]:
    params = list(model.parameters())
    return {
        "model": cfg.model,
        "model_args": cfg.model_args,
        "data": workload.data_spec,
        "data_args": cfg.data_args,
        "description": BUILTINS[cfg.model].summary if cfg.model in BUILTINS else cfg.model,
        "data_description": workload.data_description(),
        "loss": cfg.loss,
        "parameters": sum(p.numel() for p in params),
        "parameter_bytes": sum(p.numel() * p.element_size() for p in params),
        "samples_per_epoch": runs[0].samples_per_epoch,
        "batch_size": cfg.batch_size,
        "epochs": cfg.epochs,
        "repeats": cfg.repeats,
        "max_steps": cfg.max_steps,
        "threads": cfg.threads,
        "precision": cfg.precision,
        "optimizer": cfg.optimizer,
        "lr": cfg.lr,
        "seed": cfg.seed,
        "tolerance": cfg.tolerance,
    }


def assemble(cfg: CompareConfig, hw: Hardware, runs: list[Run], command: str, seen: Inspection
             ) -> Results:  # fmt: skip
    """``seen``: the command's look at the model (its meta-device model and its probe), made
    once for every check of the command."""
    assert cfg.out is not None  # the runs wrote their final states there
    device_type = "cuda" if any(d.startswith("cuda") for d in runs[0].devices) else "cpu"
    model = seen.structure
    kinds = agreement.Kinds.of(model)
    runs, dp_vs_ddp, states = derive(cfg.out, runs, kinds, cfg.tolerance)
    still = untrained(seen.workload, cfg.seed, kinds, states)
    del states
    why = diagnose(model, cfg.precision, seen.probe, cfg.ddp_options, still)
    runs = mark_ddp_options(runs, cfg.ddp_options)
    ctx = CheckContext(
        runs=tuple(runs),
        tolerance=cfg.tolerance,
        diagnosis=why,
        device_type=device_type,
        repeats=cfg.repeats,
        cpu_cores=hw.cpu_cores,
    )
    outcomes = {check: check(ctx) for check in CHECKS}
    env = environment(hw, device_type, "nccl" if device_type == "cuda" else "gloo")
    results = Results(
        dpwise_version=__version__,
        created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        command=command,
        workload=workload_facts(cfg, seen.workload, model, runs),
        environment=env,
        runs=tuple(runs),
        diagnosis=seen.probe.to_dict(),
        checks=tuple(outcomes.values()),
        recommendation=recommend(
            runs, cfg.tolerance, device_type, why.known_cause, why.untrained
        ).to_json(),
        claims=tuple(c.to_json() for c in claims(runs, outcomes, env, dp_vs_ddp)),
        link_probe=link_probe(runs),
        load=machine_load(runs),
    )
    # the probed link joins the links projected once a link probe is in the results
    section = projection.build(results, cfg.project_links, cfg.project_devices, results.link_probe)
    return replace(results, projection=section)


def link_probe(runs: list[Run]) -> Json | None:
    """The link probe of the largest-world run that probed one, a replicating (ddp) run before
    a sharding one at equal size, with that run's id as "run"; None when no run probed."""
    probed = [r for r in runs if r.link_probe]
    if not probed:
        return None
    best = max(probed, key=lambda r: (r.world_size, not traits(r.strategy).shards_model))
    return {**(best.link_probe or {}), "run": best.id}
