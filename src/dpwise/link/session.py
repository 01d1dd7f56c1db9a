"""`dpwise probe-link`'s run: the probe launched (or run in this torchrun worker), and its JSON
written to --out by the node that holds global rank 0."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpwise.infra import outowner
from dpwise.launch.cluster import text as topology_text
from dpwise.launch.cluster.topology import Topology
from dpwise.launch.env import DistEnv
from dpwise.link.settings import ProbeLinkConfig
from dpwise.link.worker import plan_for, run_probe
from dpwise.train.outputs import check_writable, write_json
from dpwise.train.session import workers_source


@dataclass(frozen=True)
class Probed:
    result: dict[str, Any] | None  # None in a torchrun worker other than rank 0
    wrote: Path | None = None  # --out, when this process wrote it


def probe(cfg: ProbeLinkConfig) -> Probed:
    if cfg.out is not None:
        check_writable(cfg.out.parent)  # before anything is launched
        outowner.check_file(cfg.out, outowner.PROBE_LINK)  # not over another command's file
    result, writer = run_probe(cfg, quiet=cfg.json)
    if result is None or cfg.out is None or not writer:
        return Probed(result)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    write_json(result, cfg.out)
    return Probed(result, cfg.out)


def _workers(cfg: ProbeLinkConfig, topology: Topology) -> tuple[Any, str]:
    """The plan this node would run (as if already adopted) and where its worker count came
    from."""
    plan = plan_for(cfg, DistEnv.from_environ({**os.environ, **topology.worker_environ()}))
    return plan, workers_source(plan, topology)


def node_line(cfg: ProbeLinkConfig, topology: Topology) -> str | None:
    """The node's topology line; None for a scheduler's per-device process other than local
    rank 0 (one line per node, as train says it)."""
    local = topology.values.get("local_rank")
    if local is not None and local.value != 0:
        return None
    plan, source = _workers(cfg, topology)
    return topology_text.node_line(topology, plan.nproc_per_node, source)


def dry_run(cfg: ProbeLinkConfig, topology: Topology, argv: Sequence[str]) -> list[str]:
    plan, source = _workers(cfg, topology)
    filled = topology_text.launch_flags(plan.launch_settings) if plan.launch else []
    where = topology_text.node_line(topology, plan.nproc_per_node, source)
    return [
        "dpwise probe-link --dry-run: nothing started",
        *topology_text.resolution_lines(topology),
        f"this node: {plan.nproc_per_node} process(es) ({source}), world size {plan.world_size}",
        *([where] if where else []),
        "command on this node:",
        "  " + topology_text.command(topology, "dpwise", argv, filled),
    ]
