"""WatchConfig and DiagnoseConfig: what `dpwise watch` and `dpwise diagnose` take. Each field is
a setting (dpwise.infra.settings): its flag, help and checks are declared here once."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from dpwise.infra.settings import finite, positive, setting, validate


def _not_negative(flag: str, value: float) -> None:
    from dpwise.errors import DpwiseError

    if value is not None and not value >= 0:
        raise DpwiseError(f"{flag} must be 0 (no status lines) or more, got {value}")


@dataclass(frozen=True, kw_only=True)
class WatchConfig:
    hang_after: float = setting(
        120.0, type=float, metavar="S", checks=[positive, finite("60")],
        help="seconds without any rank moving on (a step, a collective) before the hang is "
        "named (default: 120; the job's own collective timeout is 30 min)",
    )  # fmt: skip
    on_hang: str = setting(
        "keep", choices=("stop", "keep"),
        help="leave the job running once the hang is named (keep, the default: a slow phase "
        "past --hang-after is not always a deadlock) or end it (stop, exit code 1)",
    )  # fmt: skip
    out: Path = setting(
        Path("runs/watch"), type=Path,
        help="the folder for the ranks' states and the diagnosis (default: runs/watch)",
    )  # fmt: skip
    status_every: float = setting(
        10.0, type=float, metavar="S", checks=[_not_negative, finite("10")],
        help="seconds between status lines (0: none; default: 10)",
    )  # fmt: skip
    job: list[str] = setting(
        factory=list, flag="job", nargs=argparse.REMAINDER, metavar="-- CMD",
        help="the command you run today, after --",
    )  # fmt: skip

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True, kw_only=True)
class DiagnoseConfig:
    folder: Path = setting(
        flag="folder", type=Path, metavar="DIR",
        help="the folder dpwise watch wrote, or one with a job's Flight Recorder dumps or logs",
    )  # fmt: skip

    def __post_init__(self) -> None:
        validate(self)
