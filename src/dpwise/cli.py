"""The `dpwise` command line: one module per subcommand in dpwise.commands; no logic here."""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib
import sys
from typing import NoReturn

from dpwise import __version__
from dpwise.errors import DpwiseError

COMMANDS = (
    "train",
    "compare",
    "tune",
    "advise",
    "env",
    "lint",
    "migrate",
    "probe-link",
    "watch",
    "diagnose",
)
READ_ONLY = (
    "env",
    "lint",
    "diagnose",
)  # commands that run no model: the environment is theirs to report


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is a DpwiseError: one line on stderr and exit code 2."""

    def error(self, message: str) -> NoReturn:
        raise DpwiseError(f"{message} (see '{self.prog} --help')")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpwise",
        description="Choose, run and verify a PyTorch data-parallel strategy, with measurements.",
    )
    parser.add_argument("--version", action="version", version=f"dpwise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for name in COMMANDS:
        module = importlib.import_module(f"dpwise.commands.{name.replace('-', '_')}")
        p = sub.add_parser(
            name,
            help=module.HELP,
            description=module.DESCRIPTION,
            epilog=getattr(module, "EPILOG", None),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(p)
        p.set_defaults(func=module.run)
    return parser


def _freeze_at_exit() -> None:
    """At exit, take every object out of the garbage collector's sight (gc.freeze) before the
    interpreter's last collection, which would otherwise walk all that torch and torch._dynamo
    made: about a second of a core in every process that trained (a worker SLURM or MPI starts,
    a launcher), to find no garbage that matters: Python runs no finalizer at exit that it
    promises to. Registered once however often main runs (tests call it in their process)."""
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)


def main(argv: list[str] | None = None) -> int:
    from dpwise.infra import scratch
    from dpwise.infra.hardware import check_thread_setting, quiet_waits

    scratch.mark_command()  # every process it starts, and every temporary folder, is this one's
    _freeze_at_exit()
    quiet_waits()  # before anything imports torch
    from dpwise.infra import interrupts
    from dpwise.launch.elastic import WorkerFailed

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.argv = list(sys.argv[1:] if argv is None else argv)
        if args.command not in READ_ONLY:
            check_thread_setting()  # before torch reads it
        with interrupts.terminate_raises():  # SIGTERM ends a command as Ctrl-C does (exit 143)
            return args.func(args)
    except DpwiseError as exc:
        print(f"dpwise: error: {exc}", file=sys.stderr)
        return 2
    except WorkerFailed as exc:
        if exc.details:
            print(exc.details.rstrip(), file=sys.stderr)
        print(f"dpwise: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        print(f"dpwise: {interrupts.describe(exc)}", file=sys.stderr)
        return interrupts.exit_code(exc)
