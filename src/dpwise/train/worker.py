"""What every training process runs: plan, workload, strategy, the loop, rank 0's outputs."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Any

from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.launch.elastic import arm_teardown_watchdog, disarm_teardown_watchdog, run_guarded
from dpwise.launch.env import DistEnv
from dpwise.measure import rankwatch
from dpwise.strategies import make_strategy
from dpwise.train import outputs
from dpwise.train.checkpoint import Checkpoint
from dpwise.train.config import TrainConfig
from dpwise.train.engine import train
from dpwise.train.plan import RunPlan, resolve
from dpwise.train.restart import attempt_for
from dpwise.train.result import EpochReport, Metrics, RunResult, Trained
from dpwise.train.text import epoch_line, summary_lines
from dpwise.workload.spec import Workload, workload_for


def _print(line: str) -> None:
    print(line, flush=True)


def build_metrics(plan: RunPlan, result: RunResult) -> Metrics:
    cfg = plan.config
    return Metrics(
        result=result,
        per_rank_batch=plan.per_rank_batch,
        global_batch=cfg.batch_size,
        out=None if cfg.out is None else str(cfg.out),
        config=cfg.to_dict(),
        topology=plan.topology,
    )


@dataclass(frozen=True)
class Prepared:
    """What `dpwise train` resolved and checked before training: passed down rather than
    derived again. A launched worker gets the plan (it pickles) and builds its workload itself:
    a workload's factory need not pickle (a library model's is a closure)."""

    env: DistEnv
    plan: RunPlan
    workload: Workload
    resumed: Checkpoint | None = None  # --resume's checkpoint, loaded and checked


def run_worker(cfg: TrainConfig, prepared: Prepared | None = None) -> dict[str, Any] | None:
    """Train in this process (a DDP worker or the only process). Rank 0 returns metrics."""
    if prepared is None:
        env = DistEnv.from_environ()
        prepared = Prepared(env, resolve(cfg, Hardware.detect(), env), workload_for(cfg))
    env, plan, workload = prepared.env, prepared.plan, prepared.workload
    configure_threads(cfg.threads, plan.nproc_per_node)
    attempt = attempt_for(cfg, env, prepared.resumed)
    if attempt.notice is not None and env.is_main:
        print(attempt.notice, file=sys.stderr, flush=True)
    strategy = make_strategy(plan.strategy, env)

    def write(trained: Trained) -> None:
        """Rank 0 writes its outputs before the process group is torn down."""
        if strategy.is_main and cfg.out is not None:
            metrics = build_metrics(plan, trained.result).to_dict()
            outputs.write_outputs(cfg.out, trained.state, metrics)

    on_epoch = None if cfg.quiet else _emit_epoch
    try:
        trained = train(
            plan,
            strategy,
            workload,
            on_epoch=on_epoch,
            on_trained=write,
            before_teardown=lambda: arm_teardown_watchdog(strategy.rank),
            attempt=attempt,
        )
    finally:
        disarm_teardown_watchdog()
    if not strategy.is_main:
        return None
    metrics = build_metrics(plan, trained.result)
    if not cfg.quiet:
        for line in summary_lines(metrics):
            _print(line)
    return metrics.to_dict()


def _emit_epoch(report: EpochReport) -> None:
    _print(epoch_line(report))


def worker_entry(plan: RunPlan) -> dict[str, Any] | None:
    """The function torch.distributed's elastic launcher runs in each worker it starts."""
    return run_guarded(_launched, plan)


def _launched(plan: RunPlan) -> dict[str, Any] | None:
    """A worker dpwise launched: the plan its parent resolved (resolved once per run), this
    worker's own ranks, and its own workload (a factory need not pickle)."""
    env = DistEnv.from_environ()
    # this process trains and launches nothing; an elastic job's world is the one that met
    mine = replace(plan, launch=False, world_size=env.world_size)
    watcher = rankwatch.from_env(env.rank)  # under `dpwise watch`: this rank's state, written
    ended, error = "returned", None
    try:
        return run_worker(plan.config, Prepared(env, mine, workload_for(plan.config)))
    except BaseException as exc:
        ended, error = f"raised {type(exc).__name__}: {exc}", exc
        raise
    finally:
        if watcher is not None:
            watcher.stop(ended, error)
