"""`dpwise train`'s run, from its settings to rank 0's outputs: resolve the plan once, check
before any worker starts (preflight), hold the --out lock, then train here or launch the
workers, leaving nothing half-written whatever ends the run."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from dpwise import strategies
from dpwise.errors import DpwiseError
from dpwise.infra.atomic import remove_stale_temporaries
from dpwise.infra.hardware import Hardware
from dpwise.launch.cluster import text as topology_text
from dpwise.launch.cluster.topology import NAMES, Topology
from dpwise.launch.elastic import launch, lost_peers, node_network
from dpwise.launch.env import DistEnv
from dpwise.train import outputs, preflight
from dpwise.train.config import TrainConfig
from dpwise.train.inspection import Inspection
from dpwise.train.plan import RunPlan, resolve
from dpwise.train.text import node_line
from dpwise.train.worker import Prepared, run_worker, worker_entry
from dpwise.workload.spec import workload_for


def run_train(cfg: TrainConfig, topology: Topology | None = None) -> None:
    """Train ``cfg``: in this process (one process, or a torchrun worker), or through the
    elastic launcher. Lines go to stdout unless --quiet; a user mistake raises DpwiseError.
    ``topology``: where the job runs (launch.cluster), said in one line per node and recorded."""
    env = DistEnv.from_environ()
    plan = _plan(cfg, env, topology)
    workload = workload_for(cfg).validate()
    if not cfg.quiet and workload.data_factory is None:
        print(f"data: {workload.data_description()}", flush=True)
    seen = Inspection(workload, cfg.seed)  # the model built once for every check below
    preflight.check_run(cfg, plan.strategy, seen)
    with preflight.out_lock(cfg.out, env, cfg.nnodes):  # a live run in --out is named first
        _run_locked(cfg, env, plan, seen, topology)


def _run_locked(
    cfg: TrainConfig, env: DistEnv, plan: RunPlan, seen: Inspection, topology: Topology | None
) -> None:
    """The run, holding --out: what is in it is no live run's; then train here or launch."""
    try:
        resumed = preflight.check_locked(cfg, env, seen, plan.launch)
    except preflight.Finished as done:
        if env.is_main and not cfg.quiet:
            print(done, flush=True)
        return
    if cfg.overwrite and env.restart_count == 0:
        outputs.remove_checkpoint(cfg.out)
    try:
        _say_topology(plan, topology, env)
        if plan.launch:
            launch(plan.launch_settings, worker_entry, plan, net=_say_node(plan))
        else:
            _run_here(cfg, Prepared(env, plan, seen.workload, resumed))
    except BaseException:  # a failure, a hung peer, Ctrl-C, SIGTERM: nothing half-written
        if cfg.out is not None:
            remove_stale_temporaries(cfg.out)  # of the writers that were killed
        raise


def _say_node(plan: RunPlan) -> Any:
    """This node's place in a multi-node job (None: one node), said unless --quiet."""
    net = node_network(plan.launch_settings)
    if net is not None and not plan.config.quiet:
        print(node_line(plan.config.rdzv_endpoint, net), flush=True)
    return net


def _run_here(cfg: TrainConfig, prepared: Prepared) -> None:
    """Train in this process. A worker a scheduler started has no launcher of dpwise's to
    report a lost peer: its failed collective becomes one line here."""
    env = prepared.env
    if not env.under_launcher or env.launched_by == "torchrun":
        run_worker(cfg, prepared)
        return
    try:
        run_worker(cfg, prepared)
    except (DpwiseError, KeyboardInterrupt):
        raise
    except Exception as exc:
        failed = lost_peers(exc, env.rank, cfg.timeout, NAMES.get(env.launched_by, "the job"))
        if failed is None:
            raise
        raise failed from None


def _plan(cfg: TrainConfig, env: DistEnv, topology: Topology | None) -> RunPlan:
    """The run's plan, with where it runs; a one-process strategy on several nodes is refused."""
    if topology is not None and topology.found is not None:
        nodes = topology.found.nnodes
        if not strategies.traits(cfg.strategy).multiprocess and nodes.value > 1:
            several = " or ".join(strategies.those(lambda t: t.multiprocess))
            raise DpwiseError(
                f"--strategy {cfg.strategy} runs one process, but {topology.found.job} runs this "
                f"command on {nodes.value} nodes ({nodes.source}): each would train alone; use "
                f"--strategy {several}, or submit it to one node"
            )
    plan = resolve(cfg, Hardware.detect(), env)
    return plan if topology is None else replace(plan, topology=topology.to_dict())


def workers_source(plan: RunPlan, topology: Topology | None) -> str:
    """Where the number of workers per node came from."""
    if not strategies.traits(plan.strategy.name).multiprocess:
        return f"one process: --strategy {plan.strategy.name}"
    nproc = None if topology is None else topology.values.get("nproc")
    if nproc is not None:
        return nproc.source
    if plan.config.nproc is not None:
        return "--nproc"
    return "default: the GPUs on this node" if plan.device_type == "cuda" else "default on the CPU"


def _say_topology(plan: RunPlan, topology: Topology | None, env: DistEnv) -> None:
    """One line per node: the local rank 0 of a scheduler's workers, or the launching node."""
    if topology is None or plan.config.quiet or (plan.launch is False and env.local_rank != 0):
        return
    line = topology_text.node_line(topology, plan.nproc_per_node, workers_source(plan, topology))
    if line is not None:
        print(line, flush=True)


def dry_run(cfg: TrainConfig, topology: Topology, argv: Sequence[str]) -> list[str]:
    """--dry-run: the resolution, each value with its source, and this node's exact command."""
    env = DistEnv.from_environ({**os.environ, **topology.worker_environ()})
    plan = _plan(cfg, env, topology)
    launches = plan.launch and strategies.traits(cfg.strategy).multiprocess
    filled = topology_text.launch_flags(plan.launch_settings) if launches else []
    source = workers_source(plan, topology)
    where = topology_text.node_line(topology, plan.nproc_per_node, source)
    return [
        "dpwise train --dry-run: nothing started",
        *topology_text.resolution_lines(topology),
        f"this node: {plan.nproc_per_node} worker(s) ({source}), "
        f"world size {plan.world_size}, {plan.strategy.backend or 'no'} backend",
        *([where] if where else []),
        "command on this node:",
        "  " + topology_text.command(topology, "dpwise", argv, filled),
    ]
