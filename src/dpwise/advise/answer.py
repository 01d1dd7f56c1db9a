"""Gather facts, estimate memory, apply the rules (or the measurements): the data behind advise."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from dpwise import strategies
from dpwise.advise.estimate import (
    Settings,
    StrategyEstimate,
    estimate_all,
    facts_dict,
    facts_from_count,
    model_facts,
)
from dpwise.advise.facts import Fact, as_dict, gather
from dpwise.advise.from_results import from_results
from dpwise.advise.record import Answer, Projected
from dpwise.advise.request import AdviseRequest
from dpwise.advise.rules import decide, situation
from dpwise.diagnosis import group, probe_workload
from dpwise.diagnosis.probe import MAX_PARAMETERS
from dpwise.errors import DpwiseError
from dpwise.projection.cite import DEFAULT_DEVICES, cite
from dpwise.train import preflight
from dpwise.workload.spec import resolve_workload


def load_results(path: Path) -> dict[str, Any]:
    try:
        results = json.loads(path.read_text())
    except OSError as exc:
        raise DpwiseError(f"--from {path}: cannot read it ({exc.strerror})") from None
    except ValueError:
        raise DpwiseError(
            f"--from {path}: not JSON; give the results.json of dpwise compare"
        ) from None
    keys = ("recommendation", "runs", "workload")
    if (
        not isinstance(results, dict)
        or results.get("schema") != 1
        or not all(k in results for k in keys)
    ):
        raise DpwiseError(
            f"--from {path}: not a dpwise compare results.json (schema 1 with recommendation, "
            "runs, workload)"
        )
    return results


def _workload(req: AdviseRequest, results: dict | None) -> tuple[Any, ...]:
    """Model, model args, data, data args and loss to estimate: the flags', else the compared
    run's."""
    if req.model is None and req.params is None and results is not None:
        w = results["workload"]
        args, data_args = w.get("model_args") or {}, w.get("data_args") or {}
        # a compare of the user's own scripts has no model of dpwise's to name (None: measured only)
        return w.get("model"), args, w.get("data"), data_args, w.get("loss") or "auto"
    return req.model, req.model_args or {}, req.data, req.data_args or {}, req.loss


PLACEHOLDER = ("--model", "PKG.MODULE:MODEL_FACTORY", "--data", "PKG.MODULE:DATA_FACTORY")


def train_args(req: AdviseRequest, results: dict | None, facts: dict) -> tuple[str, ...]:
    """The workload and settings as `dpwise train` flags, so the launch line trains this model."""
    model, args, data, data_args, loss = _workload(req, results)
    out: list[str] = []
    if model is None:
        out += PLACEHOLDER if req.params is not None else ()
    elif model != "simple" or args or (data not in (None, model)):
        out += ["--model", model]
        out += [a for k, v in args.items() for a in ("--model-arg", f"{k}={v}")]
    if model is not None and data not in (None, model):
        out += ["--data", data]
    if model is not None:
        out += [a for k, v in data_args.items() for a in ("--data-arg", f"{k}={v}")]
    if loss != "auto":
        out += ["--loss", loss]
    for name in ("batch_size", "precision", "optimizer"):
        if facts[name].source == "given":
            out += [f"--{name.replace('_', '-')}", str(facts[name].value)]
    return tuple(out)


def _model_facts(req: AdviseRequest, facts: dict, results: dict | None):
    """The model's facts for the estimate, its workload and its meta-device model (None where
    only a count is known)."""
    if req.params is not None:
        return facts_from_count(req.params), None, None
    model, args, data, data_args, loss = _workload(req, results)
    if model is None:
        return None, None, None
    workload = resolve_workload(model, args, data, data_args, loss)
    meta = preflight.meta_model(workload)
    preflight.check_optimizer(meta, facts["optimizer"].value)
    cfg = {
        "precision": facts["precision"].value,
        "optimizer": facts["optimizer"].value,
        "momentum": req.momentum,
        "seed": req.seed,
    }
    return model_facts(workload, cfg, meta), workload, meta


def model_checks(
    workload: Any, meta: Any, mf: Any, device_type: str, seed: int
) -> tuple[dict[str, str], tuple[str, ...]]:
    """What the model itself rules out or needs: the strategies that cannot run it (by name, with
    the one-line reason), and the flags a ddp launch line needs (--find-unused-parameters when
    running it left parameters without gradient). The model is run (on a few rows, on the CPU)
    only where it is small enough for the probe."""
    if workload is None:
        return {}, ()
    probe = None
    if mf is not None and mf.parameters <= MAX_PARAMETERS:
        probe = probe_workload(workload, seed)
    varying = "" if probe is None else group(probe.unused.sometimes)
    refused = {}
    if meta is not None:
        for name in strategies.names():
            reason = strategies.refusal(name, meta, device_type, varying)
            if reason:
                refused[name] = reason
    return refused, (("--find-unused-parameters",) if probe and probe.unused else ())


def _from_run(req: AdviseRequest, results: dict[str, Any] | None) -> AdviseRequest:
    """Settings the compared run used fill what the flags leave open."""
    if results is None:
        return req
    w = results["workload"]
    return replace(
        req,
        batch_size=req.batch_size or w.get("batch_size"),
        precision=req.precision or w.get("precision"),
        optimizer=req.optimizer or w.get("optimizer"),
    )


def _busiest(estimate: StrategyEstimate) -> dict[str, int]:
    return max(estimate["per_device"], key=lambda d: d["bytes"])["breakdown"]


def advise(req: AdviseRequest) -> Answer:
    results = None if req.from_results is None else load_results(req.from_results)
    run_req = _from_run(req, results)
    facts = gather(
        req.gpus,
        req.nodes,
        req.device_memory,
        req.goal,
        run_req.batch_size,
        run_req.precision,
        run_req.optimizer,
    )
    if results is not None:
        for name, given in (
            ("batch_size", req.batch_size),
            ("precision", req.precision),
            ("optimizer", req.optimizer),
        ):
            if given is None and facts[name].source == "given":
                facts[name] = Fact(facts[name].value, "given", "from the results.json run")
    mf, workload, meta = _model_facts(req, facts, results)
    gpus, nodes = int(facts["gpus"].value), int(facts["nodes"].value)
    refused, ddp_flags = model_checks(workload, meta, mf, "cuda" if gpus else "cpu", req.seed)
    world = gpus * nodes if gpus else 2
    settings = Settings(
        facts["batch_size"].value,
        facts["precision"].value,
        facts["optimizer"].value,
        req.momentum,
        backend="nccl" if gpus else "gloo",
    )
    memory = None if mf is None else estimate_all(mf, world, settings, dp_world=max(gpus, 1))
    peaks = None if memory is None else {k: v["peak_bytes"] for k, v in memory.items()}
    busiest = None if memory is None else {k: _busiest(v) for k, v in memory.items()}
    s = situation(facts, peaks, busiest, train_args(req, results, facts), refused, ddp_flags)
    rec = from_results(results, s) if results is not None else decide(s)
    projected = None
    if results is not None:
        devices = req.devices or (gpus * nodes if req.gpus else DEFAULT_DEVICES)
        sentences, points = cite(results.get("projection"), req.link, devices)
        rec.reasons = [*rec.reasons, *sentences]
        projected = Projected(devices=devices, points=points)
    return {
        **rec.answer(),
        "projection": projected,
        "measured": results is not None,
        "memory": memory,
        "simulated": (
            _simulated(req, results, world, settings, memory, (refused, ddp_flags))
            if req.simulate
            else None
        ),
        "model": None if mf is None else facts_dict(mf),
        "facts": as_dict(facts),
    }


def _simulated(
    req: AdviseRequest,
    results: dict | None,
    world: int,
    s: Settings,
    memory: Any,
    needs: tuple[dict[str, str], tuple[str, ...]],
) -> dict[str, Any]:
    """Each simulated case at ``world`` ranks (dpwise.advise.simulate), its busiest rank
    beside the formula's, and the difference (share of the simulated figure). ``needs``: the
    strategies the model rules out (why) and the flags ddp needs (model_checks)."""
    from dpwise.advise import simulate
    from dpwise.advise.cases import cases as find_cases

    refused, ddp_flags = needs
    model, args, data, data_args, loss = _workload(req, results)
    cases = find_cases(s.precision)
    if model is None:
        why = "no model to simulate (--params gives a count, not a model)"
        return {c.row: {"world_size": world, "why_not": why} for c in cases}
    spec = {"model": model, "model_args": args, "data": data, "data_args": data_args,
            "loss": loss, "optimizer": s.optimizer, "momentum": s.momentum,
            "find_unused_parameters": "--find-unused-parameters" in ddp_flags}  # fmt: skip
    runs = [c for c in cases if c.strategy not in refused]
    sizes = {
        c.row: None if memory is None else _busiest_bytes(memory[c.formula_row]) for c in cases
    }
    got = simulate.simulate(spec, [(c, sizes[c.row]) for c in runs], world, s.batch_size,
                            req.simulate_timeout)  # fmt: skip
    sims = {sim.strategy: sim for sim in got}
    found = {}
    for case in cases:
        sim = sims.get(case.row) or simulate.Simulated(
            case.row, world, None, {}, 0.0, refused.get(case.strategy)
        )
        formula = sizes[case.row] if case.formula else None
        diff = None
        if sim.peak_bytes and formula is not None:
            diff = (formula - sim.peak_bytes) / sim.peak_bytes
        found[case.row] = {**asdict(sim), "formula_bytes": formula, "formula_off_by": diff}
    return found


def _busiest_bytes(estimate: StrategyEstimate) -> int:
    return int(max(d["bytes"] for d in estimate["per_device"]))
