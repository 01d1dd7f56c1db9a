"""`dpwise train`: train one workload with one strategy, launched correctly."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from dpwise import strategies
from dpwise.commands.common import add_workload_args, command_line, topology_for
from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args
from dpwise.launch import forking
from dpwise.launch.cluster.topology import LAUNCH_FLAGS, Topology, adopt
from dpwise.launch.settings import PROCESSES
from dpwise.train.config import STRATEGY_OPTIONS, WORKER_MODULE, TrainConfig

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
  srun dpwise train --strategy ddp --out runs/ddp   # SLURM: the topology from the job
  dpwise train --strategy ddp --dry-run           # where it would run, and the exact command

Under a scheduler (SLURM, a Kubeflow PyTorchJob, MPI, SkyPilot) dpwise reads the nodes, this
node's rank and the rendezvous from its variables: one task per node launches the node's
workers, one task per device makes each task one worker; flags given win. Each node prints one
line saying what it found and where each value came from; --dry-run prints it all and starts
nothing.

--batch-size is the GLOBAL batch: ddp or fsdp with W workers gives each worker batch/W rows,
so single, dp, ddp and fsdp train on the same rows in the same order and end with the same
parameters. fsdp's final.pt is the whole unsharded model, as single's.
"""


STRATEGY_AND_LAUNCH = (
    "strategy",
    *PROCESSES,
    "cluster",
    "dry_run",
    "max_restarts",
    "timeout",
    "threads",
    *STRATEGY_OPTIONS,  # the options only some strategies take
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
    "compile",
    "seed",
)


OUTPUTS = ("out", "checkpoint_every", "resume", "overwrite", "quiet")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of TrainConfig's settings (defaults and help live on its fields), in groups."""
    add_workload_args(p, TrainConfig)
    launch = p.add_argument_group("strategy and launch")
    add_settings(launch, TrainConfig, STRATEGY_AND_LAUNCH, detected=LAUNCH_FLAGS)
    add_settings(p.add_argument_group("training"), TrainConfig, TRAINING)
    add_settings(p.add_argument_group("outputs"), TrainConfig, OUTPUTS)


def train_config(args: argparse.Namespace, **resolved: object) -> TrainConfig:
    """The settings; ``resolved``: what the topology filled (the flags given among them)."""
    if args.resume != "auto":
        return from_args(TrainConfig, args, **resolved)
    if args.out is None:
        raise DpwiseError("--resume without a PATH needs --out DIR (it reads DIR/checkpoint.pt)")
    return from_args(TrainConfig, args, resume=args.out / "checkpoint.pt", **resolved)


@dataclass(frozen=True)
class TrainCommand:
    """`dpwise train`'s command line, read once: its settings, where it runs, its words."""

    config: TrainConfig
    topology: Topology
    argv: list[str]  # after `dpwise`, for --dry-run's command


def read(args: argparse.Namespace, topology: Topology | None = None) -> TrainCommand:
    """The arguments, read here only: the topology (the launch flags given, then the
    scheduler's variables; given where the caller read it first) and the settings, which it
    fills for a multi-process strategy."""
    topology = topology or topology_for(args)
    resolved = topology.settings() if strategies.multiprocess(args.strategy) else {}
    return TrainCommand(train_config(args, **resolved), topology, command_line(args))


def run(args: argparse.Namespace) -> int:
    topology = topology_for(args)
    if strategies.multiprocess(args.strategy) and topology.mode != "worker" and not args.dry_run:
        # before the settings, whose checks import torch: the workers' imports overlap them
        forking.ensure_running(WORKER_MODULE)
    elif topology.mode == "worker" and not args.dry_run:  # the scheduler started it per device
        forking.import_as_server(WORKER_MODULE)
    command = read(args, topology)
    cfg = command.config
    from dpwise.train.session import dry_run, run_train

    if cfg.dry_run:
        print("\n".join(dry_run(cfg, topology, command.argv)))
        return 0
    adopt(topology)  # a process the scheduler started per device becomes its worker
    run_train(cfg, topology)
    return 0
