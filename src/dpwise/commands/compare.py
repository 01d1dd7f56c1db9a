"""`dpwise compare`: the guide's validation checklist, run for real."""

from __future__ import annotations

import argparse
import shlex
from collections import UserString
from pathlib import Path

from dpwise.commands.common import add_workload_args, command_line, topology_for
from dpwise.compare.settings import RUN_MODULE, CompareConfig
from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args

HELP = "run single, dp and ddp side by side and check the guide's claims"


class _Description(UserString):
    """The description names the checks of dpwise.compare.checks.CHECKS, read when --help is shown:
    importing the checks imports torch, which building the parser must not."""

    def __init__(self) -> None:  # no text yet: ``data`` is computed on first use
        pass

    @property
    def data(self) -> str:  # type: ignore[override]  # computed when --help shows it, not before
        from dpwise.compare.checks import CHECKS

        names = ", ".join(c.name for c in CHECKS)
        return (
            "Train the same workload under single, dp and ddp at several world sizes, run the "
            f"{len(CHECKS)} validation checks ({names}) and write a report with a "
            "recommendation."
        )


DESCRIPTION = _Description()
EPILOG = """\
examples:
  dpwise compare                                  # the guide's SimpleModel, world sizes 1 and 2
  dpwise compare --model cnn --out runs/cnn       # BatchNorm: convergence fails and says why
  dpwise compare --model mypkg.models:build --data mypkg.data:load --world-sizes 1,2,4
  dpwise compare dp_train.py ddp_train.py --world-sizes 2   # your own scripts, unedited
  dpwise compare --script 'python train.py --lr 0.1' --script 'torchrun --nproc_per_node=2 train.py'

Your own scripts (SCRIPT or --script CMD, the command line you run today) run unedited, from
the folder you run dpwise in, as they are launched: under torchrun, spawning their own workers,
or as one process with or without DataParallel (read from the script). Each of --repeats
(default 5 for scripts) launches each script afresh for --max-steps optimizer steps (default 10)
after 2 untimed ones, from the same seed and sampler order; --world-sizes sets the processes or
devices. The workload flags (--model, --data, --epochs, --batch-size, --optimizer, --lr,
--precision, --strategies …) are for dpwise's own loop only.

Each run trains --epochs epochs (at most --max-steps optimizer steps) --repeats times from the
same initial state, in its own process; the runs take turns round by round, so a change in the
machine's speed hits every run alike. The first epoch of each repeat is an untimed warm-up when a
repeat has more than one. Exit code: 0 when no check fails, 1 when one fails, 2 on bad
input. The report (report.html, report.md, results.json, plots, traces) goes to --out.
"""


RUNS = (
    "strategies",
    "world_sizes",
    "device",
    "epochs",
    "repeats",
    "batch_size",
    "precision",
    "optimizer",
    "lr",
    "seed",
    "tolerance",
    "max_steps",
    "threads",
    "find_unused_parameters",
    "profile_steps",
    "timeout",
    "cluster",
    "dry_run",
)


PROJECTION = ("project_links", "project_devices")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of CompareConfig's settings (defaults and help live on its fields), in groups."""
    add_settings(p, CompareConfig, ("scripts", "script_commands", "reference"))
    add_workload_args(p, CompareConfig)
    add_settings(p.add_argument_group("runs"), CompareConfig, RUNS)
    add_settings(p.add_argument_group("outputs"), CompareConfig, ("out", "quiet"))
    add_settings(p.add_argument_group("projection"), CompareConfig, PROJECTION)


# What only dpwise's own loop reads: given with a script, it would be ignored.
OWN_LOOP = (
    *("model", "model_args", "data", "data_args", "loss", "strategies", "epochs"),
    *("batch_size", "precision", "optimizer", "lr", "find_unused_parameters", "device"),
)
SCRIPT_REPEATS = 5  # a script's repeat is a fresh launch: fewer than compare's own by default


def _reference_first(scripts: list[str], reference: str | None) -> list[str]:
    """The scripts with the one ``reference`` names (its command line, or the file name its
    command runs) first."""
    if reference is None:
        return scripts
    named = [s for s in scripts if s == reference or reference in shlex.split(s)
             or any(Path(w).name == reference for w in shlex.split(s))]  # fmt: skip
    if not named:
        raise DpwiseError(
            f"--reference {reference}: no script given is {reference}; name one of "
            + ", ".join(scripts)
        )
    return [named[0], *(s for s in scripts if s != named[0])]


def _run_scripts(args: argparse.Namespace, scripts: list[str], command: str) -> int:
    from dataclasses import replace

    from dpwise.launch.forking import ensure_running, stop_now
    from dpwise.userscript.harness import __name__ as harness

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    mixed = [n for n in OWN_LOOP if getattr(args, n) != parser.get_default(n)]
    if mixed:
        flag = "--" + mixed[0].replace("_", "-")
        raise DpwiseError(
            f"{flag} is for dpwise's own training loop; your scripts train with their own "
            f"model, data and optimizer: drop {flag}, or compare without --script"
        )
    cfg = compare_config(args)
    if not any(a == "--repeats" or a.startswith("--repeats=") for a in args.argv):
        cfg = replace(cfg, repeats=SCRIPT_REPEATS)
    ensure_running(harness)  # the scripts' processes fork from a server that imported torch
    try:
        from dpwise.compare.session import run_scripts

        return run_scripts(cfg, scripts, command)
    except KeyboardInterrupt:
        stop_now()
        raise


def compare_config(args: argparse.Namespace) -> CompareConfig:
    return from_args(CompareConfig, args)


def run(args: argparse.Namespace) -> int:
    from dpwise.compare.placement import one_node
    from dpwise.launch.forking import ensure_running, stop_now

    # compare runs on one node, every run its own processes: no rendezvous of the scheduler's
    topology = topology_for(args, launches=False)
    argv = command_line(args)  # the words after `dpwise`, as the results record them
    lines = one_node(topology, argv)
    if args.dry_run:
        print("\n".join(lines))
        return 0
    # a SCRIPT is a path; one that names no file but reads as a command line is taken as one
    spoken = [s if " " in s and not Path(s).exists() else shlex.quote(s) for s in args.scripts]
    scripts = [*(args.script_commands or ()), *spoken]
    if args.reference is not None and not scripts:
        raise DpwiseError("--reference names one of your scripts: give them (SCRIPT or --script)")
    if scripts:
        scripts = _reference_first(scripts, args.reference)
        return _run_scripts(args, scripts, " ".join(["dpwise", *argv]))
    ensure_running(RUN_MODULE)  # the run processes' imports overlap the ones below
    try:
        from dpwise.compare.session import run_compare

        return run_compare(compare_config(args), " ".join(["dpwise", *argv]))
    except KeyboardInterrupt:
        stop_now()
        raise
