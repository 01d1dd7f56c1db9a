"""The scripts users submit: a SLURM batch script, a Kubeflow PyTorchJob manifest or a torchrun
line per node, for `dpwise train` (advise) or a migrated script (migrate). Rendered from the
templates in advise/templates; the pattern each follows is the one dpwise expects (launch.cluster):
one task per node, the rendezvous on the first node, the port from the job id."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dpwise.advise.record import Answer

import errno
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from dpwise.errors import DpwiseError
from dpwise.infra import newfile

SCHEDULERS = ("slurm", "kubernetes", "torchrun")
DEFAULT_FILES = {"slurm": "job.sbatch", "kubernetes": "pytorchjob.yaml", "torchrun": "run.sh"}
SUBMIT = {
    "slurm": "sbatch {path}",
    "kubernetes": "kubectl apply -f {path}",
    "torchrun": "bash {path}   # on every node, with NODE0 set to node 0's host name",
}
SCHEDULER_HELP = (
    "also write a ready-to-submit job for the recommendation: slurm (an sbatch script, one task "
    "per node), kubernetes (a Kubeflow PyTorchJob) or torchrun (the line each node runs)"
)
JOB_OUT_HELP = "where --scheduler's job goes (default: job.sbatch, pytorchjob.yaml or run.sh)"
C10D_PORT = 29400
# A job's name, the same for every scheduler: a Kubeflow PyTorchJob's must be a DNS-1035 label
# (the operator's webhook), and its pods and services are named NAME-worker-INDEX, themselves
# labels of at most 63 characters: 50 leave room for "-worker-" and a five-digit index. SLURM's
# --job-name takes it unquoted (sbatch splits #SBATCH lines at spaces and ends them at '#'), and
# the scripts' comments and rendezvous id hold it as it is.
MAX_NAME = 50
NAME_RULE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """What one job runs: ``program`` is dpwise's own command (``dpwise train …``, which reads
    the scheduler itself) or a script's path and arguments (run under torchrun)."""

    scheduler: str
    name: str
    nodes: int
    gpus: int  # per node; 0: a CPU job (gloo)
    program: tuple[str, ...]
    dpwise: bool  # program is `dpwise train …`
    multiprocess: bool  # False: one process in all (single, dp)
    nproc: int  # workers per node (dpwise's --nproc, torchrun's --nproc-per-node)


def default_path(scheduler: str) -> Path:
    return Path(DEFAULT_FILES[scheduler])


def check_target(path: Path, flag: str = "--job-out") -> None:
    """Before anything is computed or written: the job is a new file (never over an existing
    one, nor a symbolic link, even a dangling one) in a folder this process can write in now."""
    if os.path.lexists(path):
        link = f" (a symbolic link to {os.readlink(path)})" if path.is_symlink() else ""
        raise DpwiseError(f"{flag} {path} exists{link}: give another path, or remove it first")
    if not path.parent.is_dir():
        folder = path.parent
        what = (
            f"{folder} is not a folder"
            if os.path.lexists(folder)
            else f"the folder {folder} does not exist"
        )
        raise DpwiseError(f"{flag} {path}: {what}")
    try:
        newfile.probe(path)
    except OSError as exc:
        raise _cannot(flag, path, exc) from None


def _cannot(flag: str, path: Path, exc: OSError) -> DpwiseError:
    why = (exc.strerror or str(exc)).lower()
    full = exc.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC))
    fix = "free space there or give another path" if full else "choose a writable folder"
    return DpwiseError(f"{flag} {path}: cannot write in {path.parent}: {why}; {fix}")


def job_name(stem: str, flag: str, path: Path) -> str:
    """A job's name from a file's: lower-case letters, digits and '-', starting with a letter,
    at most MAX_NAME characters ("o6 ddp" → "o6-ddp", "2024 run" → "ddp-2024-run"); a name
    with no letter or digit to keep is refused."""
    words = re.sub(r"[^a-z0-9]+", "-", stem.lower()).strip("-")[: MAX_NAME - 4].strip("-")
    if not words:
        raise DpwiseError(
            f"{flag} {path}: the job is named after this file, and {stem!r} has no letter or "
            "digit a job name may hold (a-z, 0-9); give the file a name with some"
        )
    if not words[0].isalpha():
        name = f"ddp-{words}"
    else:
        name = words if words.endswith("ddp") else f"{words}-ddp"
    assert NAME_RULE.fullmatch(name) and len(name) <= MAX_NAME, name
    return name


def as_argument(path: Path) -> str:
    """A path as a command's argument: one that starts with '-' would be read as an option."""
    text = str(path)
    return f"./{text}" if text.startswith("-") else text


NAMES = {"slurm": "SLURM", "kubernetes": "Kubeflow PyTorchJob", "torchrun": "torchrun"}
# dpwise's own launch flags: under a scheduler dpwise reads them from the job
_LAUNCH_FLAGS = ("--nproc", "--nnodes", "--node-rank", "--rdzv-endpoint", "--rdzv-backend",
                 "--rdzv-id")  # fmt: skip


def from_answer(answer: Answer, scheduler: str) -> JobSpec:
    """The job of an advise answer: its recommendation's `dpwise train` line, on its nodes."""
    from dpwise.strategies import traits

    strategy = answer["strategy"]
    gpus = int(answer["facts"]["gpus"]["value"] or 0)
    nodes = int(answer["facts"]["nodes"]["value"] or 1)
    line = next(c for c in answer["launch"] if c.startswith("dpwise train"))
    multiprocess = traits(strategy).multiprocess
    return JobSpec(
        scheduler=scheduler,
        name=f"dpwise-{strategy}",
        nodes=nodes if multiprocess else 1,
        gpus=gpus,
        program=(*_without_launch(shlex.split(line)), "--out", f"runs/{strategy}"),
        dpwise=True,
        multiprocess=multiprocess,
        nproc=max(gpus, 1) if gpus else 2,
    )


def for_script(
    scheduler: str, script: Path, args: tuple[str, ...], nodes: int, gpus: int
) -> JobSpec:
    """The job of a migrated script: torchrun starts it on each node."""
    return JobSpec(
        scheduler=scheduler,
        name=job_name(script.stem, "-o", script),
        nodes=nodes,
        gpus=gpus,
        program=(as_argument(script), *args),
        dpwise=False,
        multiprocess=True,
        nproc=gpus if gpus else 2,
    )


def _without_launch(argv: list[str]) -> list[str]:
    kept, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg.split("=", 1)[0] in _LAUNCH_FLAGS:
            skip = "=" not in arg
        else:
            kept.append(arg)
    return kept


def summary(spec: JobSpec, path: Path) -> dict[str, str]:
    """What advise and migrate say about the job they wrote (and put in --json)."""
    where = f"{spec.nodes} node(s) × {spec.gpus or 'no'} GPU(s)"
    pattern = "one task per node" if spec.scheduler != "torchrun" else "one line per node"
    return {
        "scheduler": spec.scheduler,
        "path": str(path),
        "summary": f"job: wrote {path} ({NAMES[spec.scheduler]}, {where}, {pattern})",
        "submit": SUBMIT[spec.scheduler].format(path=shlex.quote(as_argument(path))),
    }


def render(spec: JobSpec) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("dpwise.advise", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["sh"] = shlex.join
    env.filters["q"] = shlex.quote
    template = env.get_template(f"{spec.scheduler}.j2")
    return template.render(spec=spec, port=C10D_PORT)


def write(spec: JobSpec, path: Path, flag: str = "--job-out") -> os.stat_result:
    """Write the job to ``path``, a new file (check_target ran first), whole or not at all and
    never over a file or link made meanwhile; returns its identity, for ``newfile.remove``."""
    mode = 0o644 if spec.scheduler == "kubernetes" else 0o755
    try:
        return newfile.create(path, render(spec).encode("utf-8"), mode)
    except FileExistsError:
        raise DpwiseError(
            f"{flag} {path}: made by another program while dpwise worked; left as it is: give "
            "another path"
        ) from None
    except OSError as exc:
        raise _cannot(flag, path, exc) from None
