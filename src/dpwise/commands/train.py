"""`dpwise train`: train one workload with one strategy, launched correctly."""

from __future__ import annotations

import argparse

from dpwise import strategies
from dpwise.commands.common import add_workload_args
from dpwise.dist import forking
from dpwise.dist.env import DistEnv
from dpwise.dist.settings import PROCESSES
from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args
from dpwise.train.config import WORKER_MODULE, TrainConfig

HELP = f"train one workload with one strategy ({', '.join(strategies.names())})"
DESCRIPTION = "Train one workload with one data-parallel strategy, launched correctly."
EPILOG = """\
examples:
  dpwise train                                    # the guide's SimpleModel, one process
  dpwise train --strategy ddp --nproc 2 --out runs/ddp
  dpwise train --strategy fsdp --nproc 2 --model transformer   # FSDP2: shards each layer
  dpwise train --model transformer --model-arg layers=4 --model-arg dim=256
  dpwise train --model mypkg.models:build --data mypkg.data:load --strategy ddp
  torchrun --standalone --nproc_per_node=2 -m dpwise train --strategy ddp --out runs/ddp

--batch-size is the GLOBAL batch: ddp or fsdp with W workers gives each worker batch/W rows,
so single, dp, ddp and fsdp train on the same rows in the same order and end with the same
parameters. fsdp's final.pt is the whole unsharded model, as single's.
"""


STRATEGY_AND_LAUNCH = (
    "strategy",
    *PROCESSES,
    "max_restarts",
    "timeout",
    "threads",
    "find_unused_parameters",
    "static_graph",
)
TRAINING = (
    "epochs",
    "max_steps",
    "batch_size",
    "accum_steps",
    "lr",
    "optimizer",
    "momentum",
    "weight_decay",
    "precision",
    "seed",
)


OUTPUTS = ("out", "checkpoint_every", "resume", "overwrite", "quiet")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of TrainConfig's settings (defaults and help live on its fields), in groups."""
    add_workload_args(p, TrainConfig)
    add_settings(p.add_argument_group("strategy and launch"), TrainConfig, STRATEGY_AND_LAUNCH)
    add_settings(p.add_argument_group("training"), TrainConfig, TRAINING)
    add_settings(p.add_argument_group("outputs"), TrainConfig, OUTPUTS)


def train_config(args: argparse.Namespace) -> TrainConfig:
    if args.resume != "auto":
        return from_args(TrainConfig, args)
    if args.out is None:
        raise DpwiseError("--resume without a PATH needs --out DIR (it reads DIR/checkpoint.pt)")
    return from_args(TrainConfig, args, resume=args.out / "checkpoint.pt")


def run(args: argparse.Namespace) -> int:
    if strategies.multiprocess(args.strategy) and not DistEnv.from_environ().under_launcher:
        forking.ensure_running(WORKER_MODULE)  # the workers' imports overlap the ones below
    from dpwise.train.session import run_train

    run_train(train_config(args))
    return 0
