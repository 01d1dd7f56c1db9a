"""AdviseRequest: the scenario `dpwise advise` answers. Each field is a setting
(dpwise.infra.settings); left out (None), a fact is detected or assumed and the answer says
which."""

from __future__ import annotations

import argparse
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

from dpwise.advise.jobscript import JOB_OUT_HELP, SCHEDULER_HELP, SCHEDULERS
from dpwise.errors import DpwiseError
from dpwise.infra.settings import at_least, like, positive, setting, validate
from dpwise.projection.links import check_names
from dpwise.train.config import TrainConfig
from dpwise.workload.settings import WorkloadSettings

SIZE_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
SIZE_EXAMPLES = "7e9, 7B, 350M, 1.3b, 1.5T or 7_000_000_000"
MAX_PARAMS = 10**18  # a million times the largest models trained; floats overflow far above
_SIZE = re.compile(r"([0-9][0-9_]*(?:\.[0-9_]*)?(?:e[+-]?[0-9]+)?)([kmbgt]?)", re.IGNORECASE)
GOALS = ("prototype", "production")


def model_size(text: str) -> int:
    """A parameter count as people write it: 7e9, 7B, 350M, 1.3b, 1.5T, 7_000_000_000."""
    match = _SIZE.fullmatch(text.strip())
    try:
        value = Decimal(match[1].replace("_", "")) if match else None
    except InvalidOperation:
        value = None
    if value is None or match is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a parameter count; write it like {SIZE_EXAMPLES}"
        )
    count = int((value * SIZE_SUFFIXES[match[2].upper()]).to_integral_value())
    if count < 1:
        raise argparse.ArgumentTypeError(
            f"{text!r} is less than one parameter; write the model's size like {SIZE_EXAMPLES}"
        )
    if count > MAX_PARAMS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is more than {MAX_PARAMS:.0e} parameters, beyond what the estimate can "
            f"count; write the model's size like {SIZE_EXAMPLES}"
        )
    return count


MAX_WORLD = 131_072  # devices: beyond the largest clusters; each device is a row of the estimate


def _zero_or_more(flag: str, value: int | None) -> None:
    if value is not None and value < 0:
        raise DpwiseError(f"{flag} must be 0 or more, got {value}")


def _gib(flag: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise DpwiseError(f"{flag} must be positive (GiB), got {value}")


@dataclass(frozen=True, kw_only=True)
class AdviseRequest(WorkloadSettings):
    # None: --model simple, unless --params or --from say what the model is
    model: str | None = like(WorkloadSettings, "model", default=None)  # type: ignore[assignment]  # advise's model stays open until --params or --from say; nothing reads it as a WorkloadSettings
    gpus: int | None = setting(
        None, type=int, checks=[_zero_or_more], help="GPUs per node (default: detected)"
    )
    nodes: int | None = setting(None, type=int, checks=[at_least(1)], help="nodes (default: 1)")
    params: int | None = setting(
        None,
        type=model_size,
        checks=[at_least(1)],
        metavar="N",
        help=f"parameter count instead of --model: {SIZE_EXAMPLES}",
    )
    batch_size: int | None = like(
        TrainConfig, "batch_size", default=None, help="GLOBAL batch (default: 256)"
    )
    precision: str | None = like(TrainConfig, "precision", default=None, help="default: fp32")
    optimizer: str | None = like(TrainConfig, "optimizer", default=None, help="default: adamw")
    momentum: float = like(TrainConfig, "momentum")
    goal: str | None = setting(None, choices=GOALS, help="default: production")
    device_memory: float | None = setting(
        None, type=float, checks=[_gib], metavar="GiB", help="memory of one GPU"
    )
    from_results: Path | None = setting(
        None,
        flag="--from",
        type=Path,
        metavar="RESULTS_JSON",
        help="results.json of dpwise compare: measured numbers take precedence",
    )
    link: str | None = setting(
        None,
        checks=[lambda flag, value: check_names(flag, None if value is None else (value,))],
        metavar="LINK",
        help="the link whose scaling projection --from cites: a preset (nvlink4, ib-ndr, "
        "eth-100g, …), 'probe' or BANDWIDTH@LATENCY like 12.5GB/s@5us (default: the fastest and "
        "the slowest link the comparison projected)",
    )
    devices: int | None = setting(
        None,
        type=int,
        checks=[at_least(2)],
        metavar="N",
        help="the device count the cited projection is at (default: --gpus × --nodes when "
        "--gpus is given, else 64)",
    )
    json: bool = setting(False, action="store_true", help="machine-readable answer")
    simulate: bool = setting(
        False, action="store_true",
        help="also run PyTorch's own DDP, ZeroRedundancyOptimizer and FSDP2 on a fake process "
        "group of --gpus × --nodes ranks (no devices; fake tensors for large models) and report "
        "the busiest rank's peak by category beside the formula's (seconds to a minute each)",
    )  # fmt: skip
    simulate_timeout: float = setting(
        120.0, type=float, metavar="S", checks=[positive],
        help="seconds one simulation may take before the formula's figure stands alone",
    )  # fmt: skip
    scheduler: str | None = setting(None, choices=SCHEDULERS, help=SCHEDULER_HELP)
    job_out: Path | None = setting(None, type=Path, metavar="FILE", help=JOB_OUT_HELP)
    seed: int = 0  # not a flag: the seed of the model built for its facts

    def __post_init__(self) -> None:
        validate(self)
        world = (self.gpus or 0) * (self.nodes or 1)
        if world > MAX_WORLD:
            raise DpwiseError(
                f"--gpus × --nodes is {world:,} devices, more than the {MAX_WORLD:,} advise "
                "estimates; give the devices of the job you will run"
            )
        if self.job_out is not None and self.scheduler is None:
            raise DpwiseError("--job-out names the job --scheduler writes; give --scheduler too")
        if self.model is not None and self.params is not None:
            raise DpwiseError("give --model or --params, not both")
        if (self.link or self.devices) and self.from_results is None:
            raise DpwiseError(
                "--link and --devices choose what advise cites from a comparison's projection; "
                "give --from RESULTS_JSON too"
            )
