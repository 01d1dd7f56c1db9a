"""The topology in words: the one line each node prints, and --dry-run's resolution and the
exact command this node runs."""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from dpwise.launch.cluster.found import Sourced
from dpwise.launch.cluster.topology import LAUNCH_FLAGS, NAMES, Topology, flag
from dpwise.launch.settings import LaunchSettings

_DROPPED = ("--dry-run", "--cluster", *(flag(n) for n in LAUNCH_FLAGS))
_SWITCHES = ("--dry-run",)  # flags without a value


def _said(value: Sourced | None) -> str:
    return "" if value is None else f" ({value.source})"


def node_line(topo: Topology, workers: int, workers_source: str) -> str | None:
    """One line: the job, this node's place, its workers and where the nodes meet (None where
    no scheduler was found: the command's own lines say the rest)."""
    if topo.found is None:
        return None
    v = topo.values
    where = _where(v)
    if topo.mode == "worker":
        rank, world = v["rank"], v["world_size"]
        what = (
            f"{workers} worker(s) started by {_starter(topo)}, one per device"
            f"{_said(v['nproc'])}; this is rank {rank.value} of {world.value}{_said(rank)}"
        )
        meet = v.get("master_addr"), v.get("master_port")
    else:
        what = f"{workers} worker(s) ({workers_source})"
        endpoint = v.get("rdzv_endpoint")
        meet = (endpoint, None) if endpoint else (None, None)
    line = f"{topo.found.job}: {where}, {what}"
    host, port = meet
    if host is not None:
        address = host.value if port is None else f"{host.value}:{port.value}"
        sources = host.source
        if port is not None and port.source != host.source:
            sources = f"{host.source}, {port.source}"
            kept = ", already set"
            if host.source.endswith(kept) and port.source.endswith(kept):
                sources = f"{host.source[: -len(kept)]} and {port.source[: -len(kept)]}{kept}"
        line += f", rendezvous {address} ({sources})"
    return line


def _where(values: dict[str, Sourced]) -> str:
    """This node's place: its rank among the nodes, or one of them (the rendezvous ranks it)."""
    nodes, node = values.get("nnodes"), values.get("node_rank")
    if nodes is None:
        return "one node"
    if node is None:
        return f"one of {nodes.value} nodes{_said(nodes)}, its rank given by the rendezvous"
    return f"node {node.value} of {nodes.value}{_said(node)}"


def _starter(topo: Topology) -> str:
    """Who started the per-device processes: the scheduler, torchrun, or an unnamed launcher."""
    assert topo.found is not None
    if topo.found.scheduler == "torchrun" and topo.found.rdzv_id is None:
        return "their launcher"
    return NAMES[topo.found.scheduler]


def resolution_lines(topo: Topology) -> list[str]:
    """Each resolved value with its source."""
    if topo.found is None:
        head = "no scheduler found: the flags alone, as on one machine"
    else:
        does = {
            "launch": "dpwise launches this node's workers",
            "worker": "this process is one worker; dpwise starts nothing",
        }[topo.mode]
        head = f"{topo.found.job} ({NAMES[topo.found.scheduler]}): {does}"
    lines = [head]
    width = max((len(name) for name in topo.values), default=0)
    for name, value in topo.values.items():
        lines.append(f"  {name.ljust(width)}  {value.value!s:<16} {value.source}")
    return lines


def launch_flags(launch: LaunchSettings) -> list[str]:
    """The flags that start on one node what ``launch`` starts there, without a scheduler. An
    elastic range is written as its upper end: --nnodes takes one number."""
    flags = ["--nproc", str(launch.nproc_per_node)]
    if launch.nnodes > 1:
        flags += ["--nnodes", str(launch.nnodes), "--rdzv-backend", launch.rdzv_backend]
        flags += ["--rdzv-endpoint", str(launch.rdzv_endpoint), "--rdzv-id", launch.rdzv_id]
        if launch.rdzv_backend == "static":
            flags += ["--node-rank", str(launch.node_rank)]
    if launch.max_restarts:
        flags += ["--max-restarts", str(launch.max_restarts)]
    return flags


def command(topo: Topology, prog: str, argv: Sequence[str], filled: Sequence[str]) -> str:
    """The command that does on this node what this one does, without the scheduler's
    variables: ``argv`` less --dry-run, --cluster and the launch flags, then ``filled``
    (the resolved launch flags) and, for a worker, its variables in front."""
    kept = _strip(argv)
    tail = [*kept, *filled]
    if topo.found is not None:
        tail += ["--cluster", "none"]
    env = topo.worker_environ()
    env.pop("DPWISE_SCHEDULER", None)
    front = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    line = f"{prog} {shlex.join(tail)}"
    return f"{front} {line}" if front else line


def _strip(argv: Sequence[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _DROPPED:
            skip = "=" not in arg and name not in _SWITCHES
            continue
        kept.append(arg)
    return kept
