"""The launch's own settings: the default collective timeout and its bounds, the rendezvous
backends, the names of the settings that place a job's processes, and LaunchSettings (what the
elastic launcher is given, resolved by the planner)."""

from __future__ import annotations

from dataclasses import dataclass

from dpwise.errors import DpwiseError

RDZV_BACKENDS = ("c10d", "static")
# How long a collective waits for a peer before the run fails (--timeout). Long enough for the
# longest phase one rank spends alone while the others wait at the next collective: rank 0
# writing checkpoint.pt. torch.save + fsync took 3.8 s per GiB on a 2-core cloud VM's disk; the
# largest model DDP trains on one 80 GB GPU (~5e9 parameters with AdamW: 16 B each with the
# gradients) checkpoints 12 B per parameter, ~56 GiB, ~210 s at that rate. Short enough that a
# hung peer ends the run in minutes, not the 30 minutes torch defaults to for gloo (10 for NCCL).
DEFAULT_TIMEOUT_S = 300.0
MAX_TIMEOUT_S = 7 * 24 * 3600.0


def check_timeout(flag: str, value: float) -> None:
    """--timeout: seconds, at least 1 (gloo and NCCL need time to connect), at most a week."""
    if not 1 <= value <= MAX_TIMEOUT_S:  # also refuses nan
        raise DpwiseError(
            f"{flag} must be a number of seconds from 1 to {MAX_TIMEOUT_S:.0f}, got {value}; "
            f"e.g. {flag} {DEFAULT_TIMEOUT_S:.0f}"
        )


TIMEOUT_HELP = (
    "ddp, fsdp: seconds a collective waits for a peer before the run fails (default "
    f"{DEFAULT_TIMEOUT_S:.0f}: room for rank 0 to write a multi-GB checkpoint while the others "
    "wait); a worker that stays stopped this long is killed and named"
)

# The settings that place a job's processes, on one node or several: every command that launches
# workers (train, probe-link) offers them, in this order.
PROCESSES = (
    "nproc",
    "device",
    "backend",
    "nnodes",
    "node_rank",
    "rdzv_endpoint",
    "rdzv_backend",
    "rdzv_id",
)


@dataclass(frozen=True, kw_only=True)
class LaunchSettings:
    """What dpwise's launcher needs of a run: its processes per node, how the nodes meet, how
    often the workers restart and how long a collective waits (the planner resolves it)."""

    nproc_per_node: int
    nnodes: int = 1
    min_nodes: int | None = None  # an elastic job's lower end (None: nnodes)
    node_rank: int = 0
    rdzv_endpoint: str | None = None
    rdzv_backend: str = "c10d"
    rdzv_id: str = "dpwise"
    max_restarts: int = 0
    timeout: float = DEFAULT_TIMEOUT_S
