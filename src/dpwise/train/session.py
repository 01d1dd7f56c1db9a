"""`dpwise train`'s run, from its settings to rank 0's outputs: resolve the plan once, check
before any worker starts (preflight), hold the --out lock, then train here or launch the
workers, leaving nothing half-written whatever ends the run."""

from __future__ import annotations

from typing import Any

from dpwise import strategies
from dpwise.dist.env import DistEnv
from dpwise.dist.launch import launch, node_network
from dpwise.infra.atomic import remove_stale_temporaries
from dpwise.infra.hardware import Hardware
from dpwise.train import outputs, preflight
from dpwise.train.config import TrainConfig
from dpwise.train.plan import RunPlan, resolve
from dpwise.train.text import node_line
from dpwise.train.worker import Prepared, run_worker, worker_entry
from dpwise.workload.spec import workload_for


def run_train(cfg: TrainConfig) -> None:
    """Train ``cfg``: in this process (one process, or a torchrun worker), or through the
    elastic launcher. Lines go to stdout unless --quiet; a user mistake raises DpwiseError."""
    env = DistEnv.from_environ()
    plan = resolve(cfg, Hardware.detect(), env)
    workload = workload_for(cfg).validate()
    if not cfg.quiet and workload.data_factory is None:
        print(f"data: {workload.data_description()}", flush=True)
    varying = (
        preflight.varying(workload, cfg.seed)
        if strategies.traits(plan.strategy.name).shards_model
        else ""
    )
    preflight.check_model(
        workload, plan.strategy.name, plan.strategy.device_type, cfg.optimizer, varying
    )
    if cfg.static_graph:
        preflight.check_static_graph(workload, cfg.seed)
    preflight.check_out(cfg, env)
    try:
        resumed = None if cfg.resume is None else preflight.check_resume(cfg, workload, plan.launch)
    except preflight.Finished as done:
        if env.is_main and not cfg.quiet:
            print(done, flush=True)
        return
    with preflight.out_lock(cfg.out, env, cfg.nnodes):
        if cfg.overwrite and env.restart_count == 0:
            outputs.remove_checkpoint(cfg.out)
        try:
            if plan.launch:
                launch(plan.launch_settings, worker_entry, plan, net=_say_node(plan))
            else:
                run_worker(cfg, Prepared(env, plan, workload, resumed))
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
