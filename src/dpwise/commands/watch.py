"""`dpwise watch -- CMD`: run a user's job unedited and name the rank, line and cause of a hang."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from dpwise.errors import DpwiseError

HELP = "run your job unedited and name the rank, line and cause when it hangs"
DESCRIPTION = (
    "Runs the command after -- (torchrun …, python -m torch.distributed.run …, python train.py, "
    "or a script's path) with a watcher in every rank: no code change, the job's output and exit "
    "code its own. Each rank's steps, samples/s and last collective (torch's Flight Recorder) "
    "are shown every --status-every seconds. When no rank moves on for --hang-after seconds, the "
    "ranks' collectives are matched by sequence number and their stacks read: which rank is "
    "behind or elsewhere, at which line, what the others wait in, and the cause where it can be "
    "told, with lint's matching rule. The ranks' states and the diagnosis stay in --out, which "
    "`dpwise diagnose` reads again."
)
EPILOG = """\
examples:
  dpwise watch -- torchrun --nproc_per_node=4 train.py --epochs 3
  dpwise watch --hang-after 60 --on-hang keep -- torchrun --nproc_per_node=2 train.py
  dpwise diagnose runs/watch                      # the diagnosis again, from the folder

Exit code: the job's own; 1 when dpwise ended it after a hang (--on-hang stop); 2 on bad input.
"""


def _positive(value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number of seconds") from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"{value}: give more than 0 seconds")
    return seconds


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--hang-after", type=_positive, default=120.0, metavar="S",
                   help="seconds without any rank moving on (a step, a collective) before the "
                   "hang is named (default: 120; the job's own collective timeout is 30 min)",
                   )  # fmt: skip
    p.add_argument("--on-hang", choices=("stop", "keep"), default="stop",
                   help="end the job once the hang is named (stop, the default) or leave it "
                   "running (keep)")  # fmt: skip
    p.add_argument("--out", type=Path, default=Path("runs/watch"),
                   help="the folder for the ranks' states and the diagnosis (default: runs/watch)",
                   )  # fmt: skip
    p.add_argument("--status-every", type=float, default=10.0, metavar="S",
                   help="seconds between status lines (0: none; default: 10)")  # fmt: skip
    p.add_argument("job", nargs=argparse.REMAINDER, metavar="-- CMD",
                   help="the command you run today, after --")  # fmt: skip


def _job(words: list[str]) -> list[str]:
    words = words[1:] if words[:1] == ["--"] else words
    if not words:
        raise DpwiseError(
            "no command to watch: give it after --, as in dpwise watch -- torchrun "
            "--nproc_per_node=2 train.py"
        )
    return words


def run(args: argparse.Namespace) -> int:
    from dpwise.userscript import command as commands
    from dpwise.userscript.kind import launch_of
    from dpwise.watch.session import Watch
    from dpwise.watch.session import run as watch

    words = _job(args.job)
    if words[0] == "dpwise" or words[:3] == [sys.executable, "-m", "dpwise"]:
        raise DpwiseError(
            "dpwise watch runs your own job (torchrun …, python train.py); dpwise's own commands "
            "guard their runs themselves (--timeout names a silent rank)"
        )
    job = commands.parse(shlex.join(words), asked="the command after --")
    kind = launch_of(job).kind
    nproc = (job.nproc or 1) if job.launcher == "torchrun" or kind == "torchrun" else 1
    spawns = kind == "spawns" and job.launcher != "torchrun"
    cfg = Watch(job, nproc, args.out, args.hang_after, args.on_hang, args.status_every, spawns)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    return watch(cfg, say)
