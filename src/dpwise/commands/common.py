"""Arguments shared by several commands: the workload flags of train, compare and advise; the
topology of the commands that launch (train, probe-link, compare)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING

from dpwise.infra.settings import add_settings, given
from dpwise.workload.settings import WORKLOAD_SETTINGS, WorkloadSettings

if TYPE_CHECKING:
    from dpwise.launch.cluster.topology import Topology


def add_workload_args(p: argparse.ArgumentParser, cls: type = WorkloadSettings) -> None:
    """--model, --model-arg, --data, --data-arg and --loss, declared once on WorkloadSettings;
    ``cls``: the command's settings class (a WorkloadSettings), whose defaults they take."""
    add_settings(p.add_argument_group("workload"), cls, WORKLOAD_SETTINGS)


def topology_for(args: argparse.Namespace, launches: bool = True) -> Topology:
    """Where this command runs (launch.cluster): the launch flags the command line gave, and the
    scheduler's variables for the rest. A bad variable, a double launch or (``launches``: the
    command hands the rendezvous to torch) a host that does not resolve, or a one-node job's
    host that is not this node: DpwiseError, --dry-run included."""
    from dpwise.launch.cluster.topology import LAUNCH_FLAGS, meeting, resolve

    topology = resolve(given(args, LAUNCH_FLAGS), os.environ, getattr(args, "cluster", "auto"))
    if launches:
        meeting(topology, os.environ)
    return topology


def command_line(args: argparse.Namespace) -> list[str]:
    """The arguments the command was given (after `dpwise`), for --dry-run's command."""
    return list(getattr(args, "argv", None) or sys.argv[1:])
