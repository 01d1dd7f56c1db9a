"""What one scheduler's environment says about this process: a value and where it came from."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from dpwise.errors import DpwiseError

# SLURM's convention, as Lightning's cluster environment has it: every task of one job derives
# the same port from the job id, and two jobs on one node rarely share its last four digits.
PORT_BASE = 15000

Scheduler: TypeAlias = Literal["torchrun", "slurm", "kubeflow", "mpi", "skypilot"]
"""Who started this process (torchrun: a launcher's worker, whichever launcher)."""


@dataclass(frozen=True)
class Sourced:
    """A resolved value and where it came from (a variable, a flag, a rule)."""

    value: Any
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "source": self.source}


@dataclass(frozen=True, kw_only=True)
class Found:
    """One scheduler's view of this process.

    ``per_device``: the scheduler already started one process per device (several tasks on this
    node, or a launcher's worker): dpwise becomes that worker and starts nothing. Otherwise it
    started one task on this node and dpwise launches the node's workers.
    """

    scheduler: Scheduler
    job: str  # how the lines name it: "SLURM job 4242", "Kubeflow PyTorchJob", …
    per_device: bool
    nnodes: Sourced
    node_rank: Sourced | None = None  # None: the c10d rendezvous assigns it
    min_nodes: Sourced | None = None  # an elastic range's lower end
    nproc: Sourced | None = None  # processes (per_device) or workers per node; None: dpwise's
    rank: Sourced | None = None  # per_device: this process's global rank …
    local_rank: Sourced | None = None
    world_size: Sourced | None = None
    host: Sourced | None = None  # where the nodes meet (MASTER_ADDR, the rendezvous host)
    port: Sourced | None = None
    rdzv_backend: Sourced | None = None  # None: c10d
    rdzv_id: Sourced | None = None
    max_restarts: Sourced | None = None


SHOWN_CHARS = 80  # of a variable's value in a message: a 130 kB node list stays one short line


def shown(raw: str) -> str:
    """A variable's value as a message quotes it: its repr (a newline stays on the line), cut
    after SHOWN_CHARS characters with the length said."""
    if len(raw) <= SHOWN_CHARS:
        return repr(raw)
    return f"{raw[:SHOWN_CHARS]!r}… ({len(raw)} characters)"


def variable(name: str, env: Mapping[str, str]) -> str:
    """``environment variable NAME='value'``, the way every refusal names a variable."""
    return f"environment variable {name}={shown(env.get(name, ''))}"


def integer(env: Mapping[str, str], name: str, low: int = 0) -> int | None:
    """An integer variable (None when unset); anything else is one line naming it."""
    raw = env.get(name)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise DpwiseError(f"{variable(name, env)} is not an integer") from None
    if value < low:
        raise DpwiseError(f"{variable(name, env)} must be at least {low}")
    return value


def first_integer(env: Mapping[str, str], names: tuple[str, ...], low: int = 0) -> Sourced | None:
    """The first of ``names`` that is set, as an integer with its name as the source."""
    for name in names:
        value = integer(env, name, low)
        if value is not None:
            return Sourced(value, name)
    return None


def job_port(job_id: str, source: str) -> Sourced:
    """The port every task of job ``job_id`` derives alike: PORT_BASE + the id's last four
    digits (a job id without digits: a checksum of it)."""
    digits = "".join(ch for ch in job_id if ch.isdigit())
    if digits:
        offset = int(digits[-4:])
    else:
        import zlib

        offset = zlib.crc32(job_id.encode()) % 10000
    return Sourced(PORT_BASE + offset, f"port from {source}")


def master(env: Mapping[str, str]) -> tuple[Sourced | None, Sourced | None]:
    """MASTER_ADDR and MASTER_PORT where already set (a scheduler's or the user's): kept."""
    host = env.get("MASTER_ADDR")
    port = integer(env, "MASTER_PORT", 1)
    return (
        Sourced(host, "MASTER_ADDR, already set") if host else None,
        Sourced(port, "MASTER_PORT, already set") if port is not None else None,
    )
