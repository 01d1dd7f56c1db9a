"""`dpwise diagnose DIR`: the diagnosis of a hang again, from the folder a watch left."""

from __future__ import annotations

import argparse

from dpwise.infra.settings import add_settings, from_args
from dpwise.watch.settings import DiagnoseConfig

HELP = "name the rank, line and cause of a hang from the folder dpwise watch left"
DESCRIPTION = (
    "Reads the ranks' last states in DIR (the --out of dpwise watch: each rank's collectives, "
    "stack and steps) and prints the diagnosis: which rank is behind or elsewhere, at which "
    "line, what the others wait in, and the cause where it can be told."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_settings(p, DiagnoseConfig, ("folder",))


def run(args: argparse.Namespace) -> int:
    from dpwise.watch import folder, text
    from dpwise.watch.match import diagnose
    from dpwise.watch.session import with_rules

    cfg = from_args(DiagnoseConfig, args)
    states, ended = folder.read(cfg.folder)
    found = with_rules(diagnose(states, ended))
    print(text.diagnosis(found, None))
    return 0
