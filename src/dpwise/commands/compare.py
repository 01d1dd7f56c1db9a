"""`dpwise compare`: the guide's validation checklist, run for real."""

from __future__ import annotations

import argparse
from collections import UserString

from dpwise.commands.common import add_workload_args, command_line, topology_for
from dpwise.compare.settings import RUN_MODULE, CompareConfig
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
    add_workload_args(p, CompareConfig)
    add_settings(p.add_argument_group("runs"), CompareConfig, RUNS)
    add_settings(p.add_argument_group("outputs"), CompareConfig, ("out", "quiet"))
    add_settings(p.add_argument_group("projection"), CompareConfig, PROJECTION)


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
    ensure_running(RUN_MODULE)  # the run processes' imports overlap the ones below
    try:
        from dpwise.compare.session import run_compare

        return run_compare(compare_config(args), " ".join(["dpwise", *argv]))
    except KeyboardInterrupt:
        stop_now()
        raise
