"""`dpwise tune`: the fastest configuration of ddp or fsdp on this model and hardware, proved to
train the same model."""

from __future__ import annotations

import argparse

from dpwise.commands.common import add_workload_args, command_line, topology_for
from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args
from dpwise.launch import forking
from dpwise.launch.cluster.topology import LAUNCH_FLAGS, adopt
from dpwise.launch.settings import PROCESSES

HELP = "find the fastest settings of ddp or fsdp (buckets, hooks, ZeRO-1, micro-batches) here"
DESCRIPTION = """\
Search the knobs of --strategy ddp or fsdp on your model and hardware within --budget: every
configuration is timed against the default in interleaved rounds (compare's rule: faster only
when the whole 95 % interval clears 1.05×) and its parameters are held to the default's. Writes
the winner's train flags and code, results.json and a report (HTML, Markdown, a plot)."""
EPILOG = """\
knobs (--knobs K1,K2; default: every knob of the strategy):
  ddp:  bucket_cap_mb (sizes around the model's gradients), gradient_as_bucket_view,
        static_graph (where the model uses the same parameters every step), comm_hook (fp16;
        bf16 on NCCL; powersgd: lossy, with --allow-lossy), zero1 (ZeroRedundancyOptimizer)
  fsdp: reshard_after_forward (False: ZeRO-2-like), shard_units (model: one unit)
  both: accum_steps (the global batch as 2 or 4 micro-batches), compile (with --compile)

examples:
  dpwise tune --strategy ddp --nproc 2 --budget 5m
  dpwise tune --model transformer --strategy fsdp --nproc 2 --budget 10m --out runs/tune-fsdp
  dpwise tune --allow-lossy --nnodes 2 --node-rank 0 --rdzv-endpoint host0:29500 --budget 10m
  dpwise tune --strategy ddp --nproc 2 --budget 5m --resume   # the same search, continued

Lossless knobs must leave the parameters within --tolerance of the default's after the measured
steps, or they are rejected; lossy ones (compression hooks) are measured and recommended only
with --allow-lossy, with their drift. Ctrl-C writes the report of what was measured. Exit code: 0
when the search ran (whether or not anything beat the default), 2 on bad input.
"""

SEARCH = ("strategy", "budget", "knobs", "compile", "allow_lossy", "device_memory", "tolerance")
LAUNCH = (*PROCESSES, "cluster", "timeout", "threads")
TRAINING = ("batch_size", "lr", "optimizer", "momentum", "weight_decay", "precision", "seed",
            "find_unused_parameters")  # fmt: skip
OUTPUTS = ("out", "resume", "overwrite", "quiet")


def add_arguments(p: argparse.ArgumentParser) -> None:
    from dpwise.tune.space import TuneConfig

    add_workload_args(p, TuneConfig)
    add_settings(p.add_argument_group("search"), TuneConfig, SEARCH)
    add_settings(p.add_argument_group("launch"), TuneConfig, LAUNCH, detected=LAUNCH_FLAGS)
    add_settings(p.add_argument_group("training"), TuneConfig, TRAINING)
    add_settings(p.add_argument_group("outputs"), TuneConfig, OUTPUTS)


def run(args: argparse.Namespace) -> int:
    from dpwise.tune.space import WORKER_MODULE, TuneConfig

    topology = topology_for(args)
    if topology.mode == "worker":
        raise DpwiseError(
            "dpwise tune starts its own workers (one command per node), but this process is "
            f"already a launched worker ({topology.found.job if topology.found else 'torchrun'}): "
            "run it without torchrun, or with one task per node (SLURM: --ntasks-per-node=1)"
        )
    forking.ensure_running(WORKER_MODULE)  # the workers' imports overlap the ones below
    cfg = from_args(TuneConfig, args, **topology.settings())
    adopt(topology)
    from dpwise.tune.session import run_tune

    return run_tune(cfg, " ".join(["dpwise", *command_line(args)]))
