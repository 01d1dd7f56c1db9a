"""`dpwise compare`: the guide's validation checklist, run for real."""

from __future__ import annotations

import argparse
import sys
from collections import UserString
from pathlib import Path

from dpwise import strategies
from dpwise.commands.common import add_timeout_arg, add_workload_args
from dpwise.config import DEVICES, OPTIMIZERS, PRECISIONS

HELP = "run single, dp and ddp side by side and check the guide's claims"


class _Description(UserString):
    """The description names the checks of dpwise.checks.CHECKS, read when --help is shown:
    importing the checks imports torch, which building the parser must not."""

    def __init__(self) -> None:  # no text yet: ``data`` is computed on first use
        pass

    @property
    def data(self) -> str:
        from dpwise.checks import CHECKS

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


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_workload_args(p)
    r = p.add_argument_group("runs")
    r.add_argument(
        "--strategies", default=",".join(strategies.names()), help="comma-separated (default: all)"
    )
    r.add_argument("--world-sizes", help="e.g. 1,2,4 (default: 1,2 on CPU; 1,2,4… GPUs on GPU)")
    r.add_argument("--device", default="auto", choices=DEVICES)
    r.add_argument("--epochs", type=int, default=5, help="epochs per repeat (first is warm-up)")
    r.add_argument("--repeats", type=int, default=12, help="timed repeats per run")
    r.add_argument("--batch-size", type=int, default=256, help="GLOBAL batch")
    r.add_argument("--precision", default="fp32", choices=PRECISIONS)
    r.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    r.add_argument("--lr", type=float, default=0.01)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--tolerance", type=float, default=1e-4, help="convergence threshold")
    r.add_argument(
        "--max-steps", type=int, help="optimizer steps per repeat, the same for every run"
    )
    r.add_argument(
        "--threads", type=int, help="CPU threads per process (default: cores; ÷ world size for ddp)"
    )
    r.add_argument(
        "--find-unused-parameters",
        action="store_true",
        help="run ddp with find_unused_parameters (turned on by itself when the model probe sees "
        "parameters go unused; force it when a rarely skipped block escaped the probe)",
    )
    r.add_argument("--profile-steps", type=int, default=4, help="steps under torch.profiler")
    add_timeout_arg(r)
    o = p.add_argument_group("outputs")
    o.add_argument("--out", type=Path, default=Path("runs/compare"), help="report folder")
    o.add_argument("--quiet", action="store_true", help="no progress display")


def compare_config(args: argparse.Namespace):
    from dpwise.compare.settings import CompareConfig, parse_list
    from dpwise.config import parse_kv

    return CompareConfig(
        model=args.model,
        model_args=parse_kv(args.model_arg, "--model-arg"),
        data=args.data,
        data_args=parse_kv(args.data_arg, "--data-arg"),
        loss=args.loss,
        find_unused_parameters=args.find_unused_parameters,
        strategies=parse_list(args.strategies, "--strategies"),
        world_sizes=None
        if args.world_sizes is None
        else parse_list(args.world_sizes, "--world-sizes", int),
        device=args.device,
        epochs=args.epochs,
        repeats=args.repeats,
        batch_size=args.batch_size,
        precision=args.precision,
        optimizer=args.optimizer,
        lr=args.lr,
        seed=args.seed,
        tolerance=args.tolerance,
        profile_steps=args.profile_steps,
        max_steps=args.max_steps,
        threads=args.threads,
        timeout=args.timeout,
        out=args.out,
        quiet=args.quiet,
    )


def run(args: argparse.Namespace) -> int:
    from dpwise.compare.forking import start_early, stop_now

    start_early()  # the run processes' imports overlap the ones below
    try:
        from dpwise.compare.session import run_compare

        return run_compare(compare_config(args), " ".join(["dpwise", *sys.argv[1:]]))
    except KeyboardInterrupt:
        stop_now()
        raise
