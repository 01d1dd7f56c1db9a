"""`dpwise migrate`: rewrite a single-process or DataParallel training script for torchrun."""

from __future__ import annotations

import argparse
import difflib
import sys

from dpwise.infra.settings import add_settings, from_args
from dpwise.launch import forking
from dpwise.migrate.settings import HARNESS, MigrateConfig

HELP = "rewrite a DataParallel / single-process training script into a DDP script for torchrun"
DESCRIPTION = (
    "Reads SCRIPT and rewrites it to run under `torchrun --nproc_per_node=N` with "
    "DistributedDataParallel (and still run as one process without torchrun). Comments and "
    "formatting outside the edits are kept. Each edit is listed with the lint rule whose pitfall "
    "it avoids. The global batch is kept (per-process batch = batch // world_size); the learning "
    "rate is never changed. Patterns it cannot handle safely (a custom sampler, an iterable "
    "dataset, model parallel across devices, its own process spawning, an already distributed "
    "script) are refused with their reasons, and nothing is written."
)
EPILOG = (
    "examples:\n"
    "  dpwise migrate train.py --diff                 # what would change, and why\n"
    "  dpwise migrate train.py -o train_ddp.py --verify\n"
    "  torchrun --nproc_per_node=4 train_ddp.py      # then train on 4 GPUs\n"
    "  dpwise migrate train.py --verify --script-args='--epochs 1 --batch-size 64'\n"
    "  dpwise migrate train.py -o train_ddp.py --scheduler slurm --nodes 2 --gpus 8  # job.sbatch"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of MigrateConfig's settings (defaults and help live on its fields)."""
    add_settings(p, MigrateConfig, ("script",))
    add_settings(p.add_mutually_exclusive_group(), MigrateConfig, ("out", "diff"))
    add_settings(p, MigrateConfig, ("verify", "verify_steps", "script_args"))
    job = p.add_argument_group("the job to submit")
    add_settings(job, MigrateConfig, ("scheduler", "job_out", "nodes", "gpus"))


def run(args: argparse.Namespace) -> int:
    if args.verify:
        forking.ensure_running(HARNESS)  # the runs' imports overlap the migration
    from dpwise.migrate import MigrationRefused
    from dpwise.migrate.session import migrate_script
    from dpwise.migrate.text import render_edits, render_refusal, render_verdict

    cfg = from_args(MigrateConfig, args)
    try:
        done = migrate_script(cfg)
    except MigrationRefused as refused:
        print(render_refusal(str(cfg.script), refused.reasons), file=sys.stderr)
        return 2
    if cfg.diff:
        name = str(cfg.script)
        sys.stdout.writelines(
            difflib.unified_diff(
                done.text.splitlines(keepends=True),
                done.migration.code.splitlines(keepends=True),
                fromfile=name,
                tofile=f"{name} (migrated)",
            )
        )
    elif cfg.out is None:
        sys.stdout.write(done.migration.code)
    said = sys.stderr if not cfg.out else sys.stdout  # stdout holds the script when no -o
    print(render_edits(done.migration.edits, cfg.out), file=said)
    if done.job is not None:
        print(f"{done.job['summary']}; submit: {done.job['submit']}", file=said)
    if done.verdict is None:
        return 0
    print(render_verdict(done.verdict), file=said)
    return 0 if done.verdict.same else 1
