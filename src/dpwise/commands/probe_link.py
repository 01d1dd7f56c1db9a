"""`dpwise probe-link`: time the collectives of a process group over message sizes."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import fields

from dpwise.commands.common import command_line, topology_for
from dpwise.infra.settings import add_settings, from_args
from dpwise.launch import forking
from dpwise.launch.cluster.topology import LAUNCH_FLAGS, adopt
from dpwise.link.settings import LAUNCH, PLACEMENT, WORKER_MODULE, ProbeLinkConfig

HELP = "measure the link between processes: collective time, algbw and busbw by message size"
DESCRIPTION = (
    "Time all_reduce (and reduce_scatter, all_gather) between N processes over message sizes "
    "from 8 B to --max-bytes, the way nccl-tests does, and fit the ring model's latency α and "
    "bandwidth β."
)
EPILOG = """\
examples:
  dpwise probe-link                                    # 2 processes on this machine (gloo)
  dpwise probe-link --max-bytes 1GB --ops all_reduce,all_gather --device cuda
  dpwise probe-link --nnodes 2 --nproc 1 --node-rank 0 --rdzv-endpoint HOST:29400  # each node
  dpwise probe-link --json --out link.json

bytes is the size of the whole tensor; algbw = bytes / time; busbw = algbw × 2(n−1)/n for
all_reduce and × (n−1)/n for all_gather and reduce_scatter (nccl-tests' doc/PERFORMANCE.md), so
busbw is comparable with the link's own rate whatever n. A size's time is the largest, over the
processes, of each process's median (nccl-tests reports the mean). α comes from the smallest
sizes, β from the largest; "worst error" is the model's largest miss over all sizes. The model:
all_reduce t = 2(n−1)·α + 2(n−1)/n · S/β, all_gather / reduce_scatter t = (n−1)·α + (n−1)/n · S/β.
"""

PROBE = ("max_bytes", "ops")
OUTPUT = ("json", "out")


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_settings(p.add_argument_group("probe"), ProbeLinkConfig, PROBE)
    group = p.add_argument_group("launch (as dpwise train)")
    add_settings(group, ProbeLinkConfig, (*LAUNCH, *PLACEMENT), detected=LAUNCH_FLAGS)
    add_settings(p.add_argument_group("outputs"), ProbeLinkConfig, OUTPUT)


def run(args: argparse.Namespace) -> int:
    topology = topology_for(args)
    if topology.mode != "worker" and not args.dry_run:
        forking.ensure_running(WORKER_MODULE)  # the workers' imports overlap the ones below
    from dpwise.link.session import dry_run, node_line, probe
    from dpwise.link.text import link_lines

    own = {f.name for f in fields(ProbeLinkConfig)}
    cfg = from_args(
        ProbeLinkConfig, args, **{k: v for k, v in topology.settings().items() if k in own}
    )
    if cfg.dry_run:
        print("\n".join(dry_run(cfg, topology, command_line(args))))
        return 0
    adopt(topology)  # a process the scheduler started per device becomes its worker
    line = None if cfg.json else node_line(cfg, topology)
    if line is not None:
        print(line, file=sys.stderr, flush=True)  # stdout may be the JSON
    done = probe(cfg)
    if done.result is None:  # a torchrun worker other than rank 0
        return 0
    if cfg.json:
        print(json.dumps(done.result, indent=2))
        return 0
    print("\n".join(link_lines(done.result)))
    if done.wrote is not None:
        print(f"wrote {done.wrote}")
    return 0
