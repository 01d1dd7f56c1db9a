"""`dpwise watch -- CMD`: run a user's job unedited and name the rank, line and cause of a hang."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from dpwise.errors import DpwiseError
from dpwise.infra.settings import add_settings, from_args
from dpwise.userscript.command import ScriptCommand
from dpwise.watch.settings import WatchConfig

HELP = "run your job unedited and name the rank, line and cause when it hangs"
DESCRIPTION = (
    "Runs the command after -- (torchrun …, python -m torch.distributed.run …, python train.py, "
    "a script's path, or dpwise train …) with a watcher in every rank: no code change, the job's "
    "output and exit "
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
  dpwise watch --hang-after 60 --on-hang stop -- torchrun --nproc_per_node=2 train.py
  dpwise diagnose runs/watch                      # the diagnosis again, from the folder

Exit code: the job's own; 1 when dpwise ended it after a hang (--on-hang stop); 2 on bad input.
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of WatchConfig's settings (defaults and help live on its fields)."""
    add_settings(p, WatchConfig, ("hang_after", "on_hang", "out", "status_every", "job"))


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

    cfg = from_args(WatchConfig, args)
    words = _job(cfg.job)
    own = _own(words)
    if own is not None:  # dpwise's own train: its workers write their states themselves
        nproc = _nproc(own)
        own_job = Watch(None, nproc, cfg.out, cfg.hang_after, cfg.on_hang, cfg.status_every,
                        own=tuple(own))  # fmt: skip
        return watch(own_job, _say)
    job = commands.parse(shlex.join(words), asked="the command after --")
    kind = launch_of(job).kind
    nproc = _per_node(job) if job.launcher == "torchrun" or kind == "torchrun" else 1
    spawns = kind == "spawns" and job.launcher != "torchrun"
    watched = Watch(job, nproc, cfg.out, cfg.hang_after, cfg.on_hang, cfg.status_every, spawns)
    return watch(watched, _say)


def _per_node(job: ScriptCommand) -> int:
    """The processes torchrun would start on this node: its own reading of --nproc_per_node
    ("gpu", "cpu", "auto" counted as it counts them; 1 when not given)."""
    if job.nproc is not None or not job.per_node:
        return job.nproc or 1
    from torch.distributed.run import determine_local_world_size

    try:
        return int(determine_local_world_size(job.per_node))
    except ValueError as exc:
        raise DpwiseError(f"--nproc_per_node={job.per_node}: {exc}") from None


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _own(words: list[str]) -> list[str] | None:
    """`dpwise train …` (or `python -m dpwise train …`): its arguments after `dpwise`; another
    dpwise command is refused, as it runs no job of the user's to watch."""
    if os.path.basename(words[0]) == "dpwise":
        rest = words[1:]
    elif len(words) > 2 and words[1:3] == ["-m", "dpwise"]:
        rest = words[3:]
    else:
        return None
    if rest[:1] != ["train"]:
        raise DpwiseError(
            f"dpwise watch runs a training job: your own (torchrun …, python train.py) or "
            f"dpwise train, not dpwise {' '.join(rest[:1]) or '(no command)'}"
        )
    return rest


def _nproc(args: list[str]) -> int:
    """The processes `dpwise train --nproc N` starts (1 without it)."""
    for i, word in enumerate(args):
        value = word.split("=", 1)[1] if word.startswith("--nproc=") else (
            args[i + 1] if word == "--nproc" and i + 1 < len(args) else None)  # fmt: skip
        if value is not None and value.isdigit():
            return int(value)
    return 1
