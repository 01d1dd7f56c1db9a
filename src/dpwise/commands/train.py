"""`dpwise train`: train one workload with one strategy, launched correctly."""

from __future__ import annotations

import argparse
from pathlib import Path

from dpwise import strategies
from dpwise.commands.common import add_workload_args
from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args
from dpwise.train.config import PROCESSES, TrainConfig

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


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of TrainConfig's settings (defaults and help live on its fields), in groups."""
    add_workload_args(p, TrainConfig)
    add_settings(p.add_argument_group("strategy and launch"), TrainConfig, STRATEGY_AND_LAUNCH)
    add_settings(p.add_argument_group("training"), TrainConfig, TRAINING)
    o = p.add_argument_group("outputs")
    add_settings(o, TrainConfig, ("out", "checkpoint_every", "resume"))
    o.add_argument(
        "--overwrite",
        action="store_true",
        help="start afresh in an --out that holds another run's checkpoint.pt (deleted when this "
        "run starts); without it, or --resume, such an --out is refused",
    )
    add_settings(o, TrainConfig, ("quiet",))


def train_config(args: argparse.Namespace) -> TrainConfig:
    if args.resume != "auto":
        return from_args(TrainConfig, args)
    if args.out is None:
        raise DpwiseError("--resume without a PATH needs --out DIR (it reads DIR/checkpoint.pt)")
    return from_args(TrainConfig, args, resume=args.out / "checkpoint.pt")


def check_static_graph(workload, seed: int) -> None:
    """--static-graph breaks in backward when the used parameters change: catch that up front."""
    from dpwise.diagnosis import probe_workload

    varying = probe_workload(workload, seed).unused.sometimes
    if varying:
        from dpwise.diagnosis import group

        raise DpwiseError(
            f"--static-graph: the parameters of {group(varying)} got a gradient in some passes "
            "of the model and none in others, but a static graph needs the same every step; "
            "use --find-unused-parameters instead"
        )


def check_resume(cfg, workload, header_only: bool = False) -> dict | None:
    """Refuse a checkpoint that cannot continue this run before any worker starts. Returns
    the loaded checkpoint for this process to resume from; with ``header_only`` (the workers
    are other processes, which load it themselves) only its header is read, and None returned."""
    import torch

    from dpwise.train import checkpoint

    label = f"--resume {cfg.resume}"
    expected = checkpoint.fingerprint(cfg.to_dict())
    state = checkpoint.load(cfg.resume, expected, label, header_only=header_only)
    kept = None if header_only else state
    try:
        with torch.device("meta"):  # shapes only: no memory, no initialisation
            model = workload.build_model()
    except Exception:  # a factory that cannot build on "meta": every worker checks it instead
        return kept
    checkpoint.check_model(state, label, model)
    return kept


def run(args: argparse.Namespace) -> int:
    from dpwise.dist.env import DistEnv
    from dpwise.dist.launch import launch
    from dpwise.infra.atomic import remove_stale_temporaries
    from dpwise.infra.hardware import Hardware
    from dpwise.train import outputs
    from dpwise.train.plan import resolve
    from dpwise.train.worker import Prepared, run_worker, worker_entry
    from dpwise.workload.spec import workload_for

    if args.overwrite and args.resume is not None:
        raise DpwiseError("--resume continues the run in --out, --overwrite replaces it: give one")
    cfg = train_config(args)
    env = DistEnv.from_environ()
    plan = resolve(cfg, Hardware.detect(), env)
    workload = workload_for(cfg).validate()
    if not cfg.quiet and workload.data_factory is None:
        print(f"data: {workload.data_description()}", flush=True)
    if cfg.static_graph:
        check_static_graph(workload, cfg.seed)
    if cfg.out is not None:
        outputs.check_writable(cfg.out)
        remove_stale_temporaries(cfg.out)  # of a write a kill interrupted
        if env.restart_count == 0:  # a worker group restarted by torchrun continues its own run
            outputs.check_checkpoint(cfg.out, cfg.resume is not None, args.overwrite)
    resumed = None if cfg.resume is None else check_resume(cfg, workload, plan.launch)
    with _out_lock(cfg.out, env, cfg.nnodes):
        if args.overwrite and env.restart_count == 0:
            outputs.remove_checkpoint(cfg.out)
        try:
            if plan.launch:
                launch(plan, worker_entry, cfg, net=_say_node(plan))
            else:
                run_worker(cfg, Prepared(env, plan, workload, resumed))
        except BaseException:  # a failure, a hung peer, Ctrl-C, SIGTERM: nothing half-written
            if cfg.out is not None:
                remove_stale_temporaries(cfg.out)  # of the writers that were killed
            raise
    return 0


def _say_node(plan):
    """This node's place in a multi-node job (None: one node), said unless --quiet."""
    from dpwise.dist.launch import node_network
    from dpwise.train.text import node_line

    net = node_network(plan)
    if net is not None and not plan.config.quiet:
        print(node_line(plan.config.rdzv_endpoint, net), flush=True)
    return net


def _out_lock(out: Path | None, env, nnodes: int):
    """The lock on --out, held for the run's life by this process, or by rank 0 of an outer
    launcher's workers (rank 0 writes the files). Not on multi-node runs that dpwise launches:
    every node's command shares the --out, and which node holds rank 0 is decided later."""
    from contextlib import nullcontext

    from dpwise.infra.outlock import locked

    skip = out is None or env.rank != 0 or (nnodes > 1 and not env.under_launcher)
    return nullcontext() if skip else locked(out)
