"""ProbeLinkConfig: what `dpwise probe-link` measures and how its processes are launched."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpwise.errors import DpwiseError
from dpwise.infra.settings import like, setting, validate
from dpwise.launch.settings import PROCESSES
from dpwise.link.fit import OPS
from dpwise.train.config import TrainConfig

_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
# the settings the probe shares with `dpwise train`: how its processes are launched
LAUNCH = (*PROCESSES, "timeout")
PLACEMENT = ("cluster", "dry_run")
# What the fork server imports before it forks the launched workers (dpwise.launch.forking).
WORKER_MODULE = "dpwise.link.worker"
MIN_PROBE_BYTES = 64  # three sizes at least: 8, 32 and 64 B
MAX_PROBE_BYTES = 16 * 2**30  # a larger message is a typo more often than a plan


def parse_bytes(raw: Any, flag: str) -> int:
    """'64MiB', '1GB', '512 KiB' or '65536' as bytes (KB/MB/GB: powers of 1000, KiB/MiB/GiB:
    of 1024)."""
    if isinstance(raw, int):
        return raw
    m = _SIZE.match(str(raw))
    unit = m and _UNITS.get(m.group(2).lower())
    if not m or unit is None:
        raise DpwiseError(
            f"{flag} {raw!r} is not a size; write bytes or a number with B, KB, MB, GB, KiB, "
            f"MiB or GiB, e.g. {flag} 64MiB"
        )
    return int(float(m.group(1)) * unit)


def parse_ops(raw: Any, flag: str) -> tuple[str, ...]:
    if isinstance(raw, tuple):
        return raw
    ops = tuple(dict.fromkeys(part.strip() for part in str(raw).split(",") if part.strip()))
    unknown = [op for op in ops if op not in OPS]
    if not ops or unknown:
        raise DpwiseError(
            f"{flag} {raw!r}: {'unknown ' + ', '.join(unknown) if unknown else 'empty'}; give a "
            f"comma-separated list of {', '.join(OPS)}"
        )
    return ops


def _size_range(flag: str, value: int) -> None:
    if not MIN_PROBE_BYTES <= value <= MAX_PROBE_BYTES:
        raise DpwiseError(
            f"{flag} must be from {MIN_PROBE_BYTES} B to 16GiB, got {value} bytes; "
            f"e.g. {flag} 64MiB"
        )


@dataclass(frozen=True, kw_only=True)
class ProbeLinkConfig:
    """The probe's sizes and ops, and TrainConfig's launch settings (the same flags as train)."""

    max_bytes: int = setting(
        64 * 2**20,
        parse=parse_bytes,
        checks=[_size_range],
        metavar="SIZE",
        help="largest message, the whole tensor (default 64MiB; e.g. 1GB, 256MiB, 65536)",
    )
    ops: tuple[str, ...] = setting(
        ("all_reduce",),
        parse=parse_ops,
        metavar="OPS",
        help=f"comma-separated collectives to time, of {', '.join(OPS)} (default all_reduce)",
    )
    nproc: int | None = like(TrainConfig, "nproc", help="processes per node (default: 2 on CPU)")
    device: str = like(TrainConfig, "device")
    backend: str = like(TrainConfig, "backend")
    nnodes: int = like(TrainConfig, "nnodes")
    node_rank: int = like(TrainConfig, "node_rank")
    rdzv_endpoint: str | None = like(TrainConfig, "rdzv_endpoint")
    rdzv_backend: str = like(TrainConfig, "rdzv_backend")
    rdzv_id: str = like(TrainConfig, "rdzv_id")
    timeout: float = like(TrainConfig, "timeout", help="seconds a collective waits for a peer")
    cluster: str = like(TrainConfig, "cluster")
    dry_run: bool = like(TrainConfig, "dry_run")
    json: bool = setting(False, action="store_true", help="print the result as JSON on stdout")
    out: Path | None = setting(None, type=Path, metavar="FILE", help="also write the JSON here")

    def __post_init__(self) -> None:
        validate(self)
        if self.nproc == 1 and self.nnodes == 1:
            raise DpwiseError(
                "--nproc 1 --nnodes 1 is one process: a link needs two ends; use --nproc 2 "
                "(or --nnodes 2 across machines)"
            )
        if self.out is not None and self.out.is_dir():
            raise DpwiseError(f"--out {self.out} is a folder; give a file name, e.g. link.json")

    def train_config(self, world: int) -> TrainConfig:
        """A ddp TrainConfig with these launch settings (checked as `dpwise train` checks them);
        ``world`` is the expected world size, used as the (unused) batch."""
        return TrainConfig(
            strategy="ddp", batch_size=max(1, world), **{k: getattr(self, k) for k in LAUNCH}
        )
