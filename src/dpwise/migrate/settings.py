"""MigrateConfig: the script `dpwise migrate` rewrites, where the result goes and how --verify
runs it. Each field is a setting (dpwise.infra.settings): its flag, help and checks are declared
here once."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from dpwise.advise.jobscript import JOB_OUT_HELP, SCHEDULERS
from dpwise.errors import DpwiseError
from dpwise.infra.settings import at_least, setting, validate

# What the fork server imports before it forks --verify's runs (dpwise.launch.forking).
HARNESS = "dpwise.userscript.harness"

VERIFY_HELP = (
    "train the original and the migrated script for --verify-steps optimizer steps under torchrun "
    "(2 processes, gloo, CPU, fixed seed and data order) and compare the final parameters (equal "
    "within 1e-5). Exit 0 when equal, 1 when they differ (also when the model's BatchNorm or "
    "random layers explain it: those are named), 2 when a run fails or ends early (then nothing "
    "is written)"
)


def _steps(flag: str, value: int) -> None:
    if value < 1:
        raise DpwiseError(f"{flag} {value}: give at least 1")


@dataclass(frozen=True, kw_only=True)
class MigrateConfig:
    script: Path = setting(flag="script", type=Path, help="the training script to migrate")
    out: Path | None = setting(
        None, flag=("-o", "--out"), type=Path, help="write the migrated script here"
    )
    diff: bool = setting(False, action="store_true", help="print a unified diff of the changes")
    verify: bool = setting(False, action="store_true", help=VERIFY_HELP)
    verify_steps: int = setting(4, type=int, checks=[_steps], help="steps per run (default: 4)")
    script_args: str = setting(
        "",
        metavar="'ARGS'",
        help="the script's own arguments when --verify runs it, as one shell-quoted string "
        "(--script-args='--epochs 1 out.pt')",
    )

    scheduler: str | None = setting(
        None,
        choices=SCHEDULERS,
        help="also write a ready-to-submit job that runs the migrated script (-o) under torchrun: "
        "slurm (an sbatch script, one task per node), kubernetes (a Kubeflow PyTorchJob) or "
        "torchrun (the line each node runs)",
    )
    job_out: Path | None = setting(None, type=Path, metavar="FILE", help=JOB_OUT_HELP)
    nodes: int = setting(1, type=int, checks=[at_least(1)], help="--scheduler: nodes")
    gpus: int = setting(
        0, type=int, checks=[at_least(0)], help="--scheduler: GPUs per node (0: a CPU job, 2 "
        "processes per node)"
    )  # fmt: skip

    def __post_init__(self) -> None:
        validate(self)
        if self.scheduler is not None and (self.out is None or self.diff):
            raise DpwiseError(
                f"--scheduler {self.scheduler} writes a job that runs the migrated script: give "
                "-o FILE for it (the job runs that file)"
            )
        if self.scheduler is None and (self.job_out is not None):
            raise DpwiseError("--job-out names the job --scheduler writes; give --scheduler too")
