"""`dpwise migrate`: rewrite a single-process or DataParallel training script for torchrun."""

from __future__ import annotations

import argparse
import difflib
import shlex
import sys
from pathlib import Path

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
    "  dpwise migrate train.py --verify --script-args='--epochs 1 --batch-size 64'"
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("script", type=Path, help="the training script to migrate")
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--out", type=Path, help="write the migrated script here")
    out.add_argument("--diff", action="store_true", help="print a unified diff of the changes")
    p.add_argument(
        "--verify",
        action="store_true",
        help="train the original and the migrated script for --verify-steps optimizer steps "
        "under torchrun (2 processes, gloo, CPU, fixed seed and data order) and compare the final "
        "parameters (equal within 1e-5). Exit 0 when equal, 1 when they differ (also when the "
        "model's BatchNorm or random layers explain it: those are named), 2 when a run fails "
        "or ends early (then nothing is written)",
    )
    p.add_argument("--verify-steps", type=int, default=4, help="steps per run (default: 4)")
    p.add_argument(
        "--script-args",
        default="",
        metavar="'ARGS'",
        help="the script's own arguments when --verify runs it, as one shell-quoted string "
        "(--script-args='--epochs 1 out.pt')",
    )


def run(args: argparse.Namespace) -> int:
    from dpwise.errors import DpwiseError
    from dpwise.migrate import MigrationRefused, migrate_source
    from dpwise.migrate.text import render_edits, render_refusal

    if args.verify_steps < 1:
        raise DpwiseError(f"--verify-steps {args.verify_steps}: give at least 1")
    try:
        text = args.script.read_text(encoding="utf-8")
    except OSError as exc:
        raise DpwiseError(
            f"cannot read {args.script}: {exc.strerror}; give a readable script"
        ) from None
    except UnicodeDecodeError:
        raise DpwiseError(
            f"{args.script} is not UTF-8 text: give a Python training script"
        ) from None
    if args.out is not None and args.out.resolve() == args.script.resolve():
        raise DpwiseError(
            f"-o {args.out} is the script itself: write the migrated script to a new file "
            "(the original stays, to compare against and to --verify)"
        )
    try:
        result = migrate_source(text)
    except MigrationRefused as refused:
        print(render_refusal(str(args.script), refused.reasons), file=sys.stderr)
        return 2
    verdict = _verify(args, result.code) if args.verify else None  # a failed run writes nothing
    _emit(args, text, result.code)
    print(render_edits(result.edits, args.out), file=sys.stderr if not args.out else sys.stdout)
    if verdict is None:
        return 0
    from dpwise.migrate.text import render_verdict

    print(render_verdict(verdict), file=sys.stderr if not args.out else sys.stdout)
    return 0 if verdict.same else 1


def _verify(args: argparse.Namespace, code: str):  # type: ignore[no-untyped-def]
    from dpwise.migrate.verify import verify

    return verify(args.script, code, shlex.split(args.script_args), steps=args.verify_steps)


def _emit(args: argparse.Namespace, text: str, code: str) -> None:
    """The migrated script: a diff, a file written atomically (-o), or the text on stdout."""
    from dpwise.errors import DpwiseError
    from dpwise.infra.atomic import atomic_write_text

    if args.diff:
        name = str(args.script)
        sys.stdout.writelines(
            difflib.unified_diff(
                text.splitlines(keepends=True),
                code.splitlines(keepends=True),
                fromfile=name,
                tofile=f"{name} (migrated)",
            )
        )
    elif args.out is not None:
        try:
            atomic_write_text(args.out, code)
        except OSError as exc:
            raise DpwiseError(
                f"cannot write {args.out}: {exc.strerror}; choose a writable path for -o"
            ) from None
    else:
        sys.stdout.write(code)
