"""Arguments shared by several commands: the workload flags of train, compare and advise."""

from __future__ import annotations

import argparse

from dpwise.infra.settings import add_settings
from dpwise.workload.settings import WORKLOAD_SETTINGS, WorkloadSettings


def add_workload_args(p: argparse.ArgumentParser, cls: type = WorkloadSettings) -> None:
    """--model, --model-arg, --data, --data-arg and --loss, declared once on WorkloadSettings;
    ``cls``: the command's settings class (a WorkloadSettings), whose defaults they take."""
    add_settings(p.add_argument_group("workload"), cls, WORKLOAD_SETTINGS)
