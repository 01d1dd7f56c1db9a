"""`dpwise tune` end to end: check the settings and the model, lay out the candidates, run the
search in the workers (again after a candidate fails: the failure its worker recorded beside the
journal), then write results.json and the report. Ctrl-C keeps what was measured; --resume
continues the journal."""

from __future__ import annotations

import contextlib
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from dpwise import strategies
from dpwise.compare import publish
from dpwise.diagnosis import group, probe_workload
from dpwise.diagnosis.layers import sparse_layers
from dpwise.errors import DpwiseError
from dpwise.infra import outowner
from dpwise.infra.hardware import Hardware
from dpwise.infra.interrupts import Interrupted
from dpwise.infra.outlock import first_missing, locked
from dpwise.infra.units import mib
from dpwise.launch.elastic import WorkerFailed, launch
from dpwise.launch.env import DistEnv
from dpwise.train import outputs, preflight
from dpwise.train.plan import RunPlan, resolve
from dpwise.tune import journal, render
from dpwise.tune.journal import Candidate, Failure, Journal, SearchFacts
from dpwise.tune.results import assemble
from dpwise.tune.space import Facts, TuneConfig, first_stage
from dpwise.tune.worker import search_entry
from dpwise.workload.spec import Workload, workload_for

MAX_FAILURES = 8  # candidates that fail in one session before the search stops


def run_tune(cfg: TuneConfig, command: str) -> int:
    started = time.time()
    env = DistEnv.from_environ()
    plan = resolve(cfg.train_config({}), Hardware.detect(), env)
    workload = workload_for(cfg).validate()
    probe = probe_workload(workload, cfg.seed)  # parameters unused in some steps
    varying = group(probe.unused.sometimes)
    preflight.check_model(workload, cfg.strategy, plan.device_type, cfg.optimizer, varying)
    if probe.unused and "find_unused_parameters" in strategies.traits(cfg.strategy).options:
        cfg = replace(cfg, find_unused_parameters=True)  # DDP stops without it
    facts = _facts(cfg, plan, workload, varying)
    fresh = _fresh_journal(cfg, plan, facts, workload)  # --knobs refused here, before any file
    outputs.check_writable(cfg.out)
    saved = _saved(cfg)
    created = first_missing(cfg.out)
    with locked(cfg.out):
        j = saved or fresh
        j.sessions += 1
        j.stopped, j.in_flight = None, None
        j.prior = j.elapsed
        if saved is None and cfg.overwrite:
            _clear(cfg)
        try:
            journal.write(cfg.out, j)
            done = _search(cfg, plan, started)
        except DpwiseError as exc:
            raise _failed(cfg, created, saved is None, exc, command) from None
        except (Interrupted, WorkerFailed) as exc:
            _stopped(cfg, j, saved is None, created, exc, command)
            raise
        if done is None:
            if not cfg.quiet:
                print("tune: this node's workers are done; rank 0 ran on another node, whose --out "
                      "holds the results and the report")  # fmt: skip
            return 0
        doc, written = _publish(cfg, done, command)
    if not cfg.quiet:
        print(render.summary(doc, written))
    return 0


def _stopped(cfg: TuneConfig, j: Journal, first: bool, created: Path | None,
             exc: Interrupted | WorkerFailed, command: str) -> None:  # fmt: skip
    """Ctrl-C, or the default's own training failed: keep what was measured, and publish it
    (the caller raises again)."""
    j = journal.read(cfg.out) or j
    j.stopped = "interrupted" if isinstance(exc, Interrupted) else "failed"
    j.in_flight = None
    journal.write(cfg.out, j)
    if not journal.measured(cfg.out, j) and (first or cfg.nnodes > 1):
        if cfg.nnodes == 1:
            _remove(cfg, created)  # nothing measured yet: nothing half-written
        return  # several nodes: rank 0's --out may hold it; --resume needs every node's
    _, written = _publish(cfg, j, command)
    if not cfg.quiet:
        what = "interrupted" if isinstance(exc, Interrupted) else "stopped"
        print(
            f"tune: {what} after {j.rounds} round(s); what was measured is in "
            f"{written.html}; `{_resumed(command)}` continues",
            file=sys.stderr,
            flush=True,
        )


def _facts(cfg: TuneConfig, plan: RunPlan, workload: Workload, varying: str) -> SearchFacts:
    model = preflight.meta_model(workload)
    gradient_bytes, sparse = 0, list[str]()
    if model is not None:
        sparse = [layer.name for layer in sparse_layers(model)]
        gradient_bytes = sum(p.numel() * p.element_size() for p in model.parameters()
                             if p.requires_grad)  # fmt: skip
    return {
        "gradient_bytes": gradient_bytes,
        "backend": str(plan.backend),
        "device_type": plan.device_type,
        "world_size": plan.world_size,
        "nproc_per_node": plan.nproc_per_node,
        "varying": varying,
        "sparse": ", ".join(sparse[:3]) + (", …" if len(sparse) > 3 else ""),
        "find_unused_parameters": cfg.find_unused_parameters,
    }


def _fresh_journal(cfg: TuneConfig, plan: RunPlan, facts: SearchFacts, workload: Workload
                   ) -> Journal:  # fmt: skip
    f = Facts(
        strategy=cfg.strategy,
        gradient_bytes=facts["gradient_bytes"],
        backend=facts["backend"],
        worlds=(plan.world_size,),
        batch_size=cfg.batch_size,
        varying=facts["varying"],
        sparse=facts["sparse"],
        allow_lossy=cfg.allow_lossy,
        compile=cfg.compile,
        knobs=cfg.knobs,
    )
    candidates = first_stage(f)
    notes = []
    if cfg.device_memory is not None:
        notes += _estimated(cfg, plan, workload, candidates)
    if not any(c.state == "active" for c in candidates):
        why = "; ".join(sorted({f"{c.name}: {c.reason}" for c in candidates})) or "none"
        raise DpwiseError(
            f"no configuration of --strategy {cfg.strategy} is left to measure ({why}); "
            "widen --knobs, or add --allow-lossy"
        )
    return Journal(settings=_settings(cfg), facts=facts, candidates=candidates, notes=notes)


def _estimated(cfg: TuneConfig, plan: RunPlan, workload: Workload, candidates: list[Candidate]
               ) -> list[str]:  # fmt: skip
    """Candidates whose estimated peak (dpwise advise's memory model) is above --device-memory
    are pruned before they run; the others are held to it once measured."""
    from dpwise.advise.estimate import Settings, model_facts, per_device

    limit = int(float(cfg.device_memory or 0) * 2**30)
    facts = model_facts(workload, {"precision": cfg.precision, "optimizer": cfg.optimizer,
                                   "momentum": cfg.momentum, "seed": cfg.seed})  # fmt: skip
    world = plan.world_size
    for c in candidates:
        if c.state != "active":
            continue
        steps = int(c.config.get("accum_steps", 1))
        s = Settings(cfg.batch_size // steps, cfg.precision, cfg.optimizer, cfg.momentum,
                     str(plan.backend))  # fmt: skip
        parts = per_device(facts, cfg.strategy, world, s)[0]
        if c.config.get("zero1"):
            parts["optimizer_state"] = parts.get("optimizer_state", 0) // world
        if c.config.get("gradient_as_bucket_view"):
            parts["ddp_buckets"] = 0
        need = sum(parts.values())
        if need > limit:
            c.state, c.reason = (
                "pruned",
                (
                    f"estimated {mib(need)} per device, above --device-memory "
                    f"{cfg.device_memory:g} GiB: not run"
                ),
            )
    return [
        f"--device-memory {cfg.device_memory:g} GiB: estimates by dpwise advise's model "
        f"({facts.method}) pruned before running, measured peaks held to it after"
    ]


def _settings(cfg: TuneConfig) -> dict[str, Any]:
    return {k: v for k, v in cfg.to_dict().items() if k not in journal.MAY_CHANGE}


def _saved(cfg: TuneConfig) -> Journal | None:
    """The journal --resume continues; without --resume, an --out holding one is refused."""
    found = journal.path(cfg.out).is_file()
    if outowner.check(cfg.out, outowner.TUNE, cfg.overwrite) is not None:
        found = False  # --overwrite of another command's results: its journal is not ours
    if not cfg.resume:
        if found and not cfg.overwrite:
            raise DpwiseError(
                f"{cfg.out} holds a search already; --resume continues it, --overwrite starts "
                "afresh, or give another --out"
            )
        return None
    if not found:
        raise DpwiseError(f"--resume: {cfg.out} holds no search (no {journal.path(cfg.out)})")
    saved = journal.read(cfg.out)
    assert saved is not None
    changed = journal.differences(saved.settings, _settings(cfg))
    if changed:
        raise DpwiseError(
            f"--resume: the search in {cfg.out} ran with other settings ({'; '.join(changed)}); "
            "give the same settings, or start afresh with --overwrite"
        )
    if saved.elapsed >= cfg.budget:
        raise DpwiseError(
            f"--resume: the search in {cfg.out} used {saved.elapsed:.0f} s of its --budget "
            f"{cfg.budget:g} s already; give a larger --budget to continue it"
        )
    if saved.stopped == "finished":
        raise DpwiseError(f"--resume: the search in {cfg.out} is finished; see its report")
    return saved


def _clear(cfg: TuneConfig) -> None:
    """--overwrite: the search in --out, or another command's report and the files it names."""
    if outowner.owner(cfg.out) == outowner.COMPARE:
        publish.remove_report(cfg.out)
    shutil.rmtree(journal.folder(cfg.out), ignore_errors=True)
    for name in ("results.json", "report.md", "report.html", render.PLOT):
        with contextlib.suppress(FileNotFoundError):
            (cfg.out / name).unlink()


def _remove(cfg: TuneConfig, created: Path | None) -> None:
    if created is not None:
        shutil.rmtree(created, ignore_errors=True)
    else:
        shutil.rmtree(journal.folder(cfg.out), ignore_errors=True)


def _failed(cfg: TuneConfig, created: Path | None, first: bool, exc: DpwiseError, command: str
            ) -> DpwiseError:  # fmt: skip
    """The error a search stopped with. What it measured stays, the last journal written and
    the default's reference (a full disk: the write that failed replaced nothing), and the line
    says so; a first session that measured nothing leaves nothing behind."""
    try:
        j = journal.read(cfg.out)
    except DpwiseError:
        j = None
    if j is None or not journal.measured(cfg.out, j):
        if first:
            _remove(cfg, created)
        return exc
    j.stopped, j.in_flight = "failed", None
    with contextlib.suppress(DpwiseError):  # no room: the journal last written is kept as it is
        journal.write(cfg.out, j)
    return DpwiseError(
        f"{exc}; what was measured ({j.rounds} round(s)) is kept in {journal.folder(cfg.out)}: "
        f"`{_resumed(command)}` continues the search"
    )


def _search(cfg: TuneConfig, plan: RunPlan, started: float) -> Journal | None:
    """Run the search in the workers; a candidate whose training fails is recorded with its
    cause and the workers start again from the journal (one node)."""
    failures = 0
    while True:
        journal.clear_failures(cfg.out)
        try:
            # commands/tune refused a process that is already a worker: tune launches
            got = launch(plan.launch_settings, search_entry, cfg, started)
            # rank 0 returns the journal; None here: it ran on another node, whose --out has it
            return got.get(0)
        except WorkerFailed as exc:
            j = journal.read(cfg.out)
            name = None if j is None else j.in_flight
            c = None if j is None or name is None else j.find(name)
            if j is None or c is None or c is j.default or cfg.nnodes > 1:
                raise
            failures += 1
            c.state, c.reason = "failed", _cause(exc, journal.failures(cfg.out), c.name)
            j.in_flight = None
            j.notes.append(f"{c.name} failed while it trained: {c.reason}")
            journal.write(cfg.out, j)
            if not cfg.quiet:
                print(f"tune: {c.name} failed ({c.reason}); the search goes on", file=sys.stderr,
                      flush=True)  # fmt: skip
            if failures >= MAX_FAILURES:
                j.stopped = "failed"
                journal.write(cfg.out, j)
                return j


def _resumed(command: str) -> str:
    return command if command.endswith(" --resume") else f"{command} --resume"


def _cause(exc: WorkerFailed, recorded: list[Failure], candidate: str) -> str:
    """Why the candidate failed, in one line: the failure its worker recorded (the rank the
    launcher names first), else the launcher's own line (a worker killed, a native crash)."""
    mine = [f for f in recorded if f.candidate == candidate]
    found = next((f for f in mine if f.rank == exc.rank), mine[0] if mine else None)
    text = str(exc) if found is None else found.message
    return text.strip().splitlines()[0][:300] if text.strip() else "its workers failed"


def _publish(cfg: TuneConfig, j: Journal, command: str) -> tuple[dict[str, Any], render.Written]:
    doc = assemble(cfg, j, command)
    written = render.write(doc, cfg.out)
    outputs.write_json(doc, cfg.out / "results.json")
    return doc, written
