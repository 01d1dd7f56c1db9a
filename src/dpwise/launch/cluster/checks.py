"""Every value dpwise hands torch about where a job runs, checked in one place before anything
starts or is written: counts positive, each rank below its count, ports from 1 to 65535, an
endpoint that parses (``found``, ``endpoint``: whichever reader or flag gave them); and, for a
command that launches, a rendezvous host that resolves and, where the job has one node, is this
node (``meeting``). Each refusal is one line naming the variable, or the flag, and its value.

What torch did with them instead: a port of 99999 was a ValueError traceback from the launcher;
a one-node job whose host does not resolve retried for 99.8 s, then a 91-line traceback.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from dpwise.errors import DpwiseError
from dpwise.launch import netaddr
from dpwise.launch.cluster.found import Found, Sourced, shown

_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9_]+\b")  # RANK, SLURM_JOB_NODELIST (where set)


def said(item: Sourced, env: Mapping[str, str]) -> str:
    """How a refusal names a value: the variable it was read from, with the variable's text
    (``first host of SLURM_JOB_NODELIST``: that list), else the value and where it came from
    (a flag, a rule)."""
    read = [name for name in _VARIABLE.findall(item.source.split(",")[0]) if name in env]
    if read:
        return f"environment variable {read[0]}={shown(env[read[0]])}"
    return f"{shown(str(item.value))} ({item.source})"


def endpoint(text: str, named: str) -> tuple[str, int | None]:
    """HOST and PORT of a rendezvous endpoint; ``named``: how the refusal names it."""
    try:
        return netaddr.split_endpoint(text)
    except ValueError as exc:
        raise DpwiseError(
            f"{named} is not a rendezvous endpoint HOST:PORT ({exc}), e.g. node1:29400"
        ) from None


def found(job: Found, env: Mapping[str, str]) -> None:
    """A scheduler's view of this process, whichever reader made it."""
    for count in (job.nnodes, job.min_nodes, job.nproc, job.world_size):
        if count is not None and count.value < 1:
            raise DpwiseError(f"{said(count, env)} must be at least 1")
    ranks = ((job.node_rank, job.nnodes), (job.rank, job.world_size), (job.local_rank, job.nproc))
    for rank, count in ranks:
        if rank is not None and count is not None and not 0 <= rank.value < count.value:
            raise DpwiseError(
                f"{said(rank, env)} must lie from 0 to {count.value - 1} ({count.source}="
                f"{count.value})"
            )
    if job.port is not None and not 1 <= job.port.value <= netaddr.MAX_PORT:
        raise DpwiseError(
            f"{said(job.port, env)} gives port {job.port.value}: a port is a number from 1 to "
            f"{netaddr.MAX_PORT}"
        )
    if job.host is not None and not str(job.host.value).strip():
        raise DpwiseError(f"{said(job.host, env)} names no host")


def meeting(values: Mapping[str, Sourced], job: Found | None, env: Mapping[str, str]) -> None:
    """Where the nodes meet, for a command that launches: the host must resolve here (torch's
    rendezvous would retry it for minutes) and, on a job of one node, be one of this node's
    addresses (its store is on this node: another host would never start it). A launcher's
    own workers (torchrun's) are left to the launcher, which already met there."""
    host = values.get("master_addr") or values.get("rdzv_endpoint")
    if host is None:
        return
    name = host.value if "master_addr" in values else netaddr.split_endpoint(host.value)[0]
    by_flag = host.source.startswith("--")
    address = netaddr.resolve(name)
    if address is None:
        known = "a name or address every node resolves"
        fix = f"give --rdzv-endpoint {known}" if by_flag else f"set MASTER_ADDR to {known}, or "
        raise DpwiseError(
            f"{said(host, env)} names host {name!r}, which does not resolve to an address here: "
            + (fix if by_flag else fix + "give --rdzv-endpoint HOST:PORT")
        )
    nodes = values.get("nnodes", Sourced(1, "--nnodes"))
    launcher = job is not None and job.scheduler == "torchrun"
    if nodes.value == 1 and not launcher and netaddr.owns_free(address, 0) is False:
        fix = (
            "give this node's name in --rdzv-endpoint, or leave it out"
            if by_flag
            else "set MASTER_ADDR to this node's name, or pass --cluster none to run on this "
            "node alone"
        )
        shown_as = name if name == address else f"{name} ({address})"
        raise DpwiseError(
            f"{said(host, env)} names host {shown_as}, which is not this node, but the job runs "
            f"on one node ({nodes.source}={nodes.value}), so it meets on this node: {fix}"
        )
