"""Arguments shared by several commands."""

from __future__ import annotations

import argparse


def add_workload_args(p: argparse.ArgumentParser) -> None:
    w = p.add_argument_group("workload")
    w.add_argument("--model", default="simple", help="simple | cnn | transformer | pkg.mod:factory")
    w.add_argument("--model-arg", action="append", metavar="KEY=VALUE", help="factory argument")
    w.add_argument("--data", default=None, help="pkg.mod:factory returning a Dataset or (x, y)")
    w.add_argument("--data-arg", action="append", metavar="KEY=VALUE", help="e.g. samples=20000")
