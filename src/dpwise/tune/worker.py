"""What every worker of the search runs: the process group once, the workload once, the search."""

from __future__ import annotations

from typing import Any

import torch.distributed as dist

from dpwise.errors import DpwiseError
from dpwise.infra.hardware import Hardware, configure_threads
from dpwise.launch.elastic import run_guarded
from dpwise.launch.env import DistEnv
from dpwise.strategies import make_strategy
from dpwise.train.plan import resolve
from dpwise.tune import journal
from dpwise.tune.journal import Journal
from dpwise.tune.measure import Trainer
from dpwise.tune.search import Search
from dpwise.tune.settings import TuneConfig
from dpwise.workload.spec import workload_for


def _say(line: str) -> None:
    import sys

    print(f"tune: {line}", file=sys.stderr, flush=True)


def search_entry(cfg: TuneConfig, started: float) -> dict[str, Any] | None:
    """The function the elastic launcher runs in each worker; rank 0 returns the journal."""
    return run_guarded(_search, cfg, started)


def _search(cfg: TuneConfig, started: float) -> dict[str, Any] | None:
    env = DistEnv.from_environ()
    hw = Hardware.detect()
    configure_threads(cfg.threads, env.local_world_size)
    plan = resolve(cfg.train_config({}), hw, env)
    holder = make_strategy(plan.strategy, env)  # holds the process group for every training
    holder.setup()
    try:
        workload = workload_for(cfg)
        data = workload.load_data(cfg.seed)
        box: list[Any] = [None]
        if holder.is_main:
            saved = journal.read(cfg.out)
            if saved is None:
                raise DpwiseError(f"{journal.path(cfg.out)} is missing: start the search afresh")
            box[0] = saved.to_json()
        if dist.get_world_size() > 1:
            dist.broadcast_object_list(box, src=0)
        j = Journal.from_json(box[0])
        quiet = cfg.quiet or not holder.is_main
        search = Search(cfg, j, Trainer(env, hw, workload, data), holder.is_main, started,
                        (lambda line: None) if quiet else _say)  # fmt: skip
        done = search.run()
        return done.to_json() if holder.is_main else None
    finally:
        holder.teardown()
