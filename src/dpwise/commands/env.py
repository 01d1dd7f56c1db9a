"""`dpwise env`: the environment report to paste into a bug report."""

from __future__ import annotations

import argparse
import json

from dpwise.infra.env_settings import EnvRequest
from dpwise.infra.settings import add_settings, from_args

HELP = "print versions, GPUs, backends and launcher variables (for bug reports)"
DESCRIPTION = (
    "Python, PyTorch, CUDA and NCCL versions, NCCL and gloo availability, GPUs with memory and "
    "peer access, CPU cores and PyTorch threads, torchrun-related variables, dpwise's version."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_settings(p, EnvRequest, ("json",))


def run(args: argparse.Namespace) -> int:
    from dpwise.infra import env_report
    from dpwise.infra.env_text import render

    request = from_args(EnvRequest, args)
    info = env_report.gather()
    print(json.dumps(info, indent=2) if request.json else render(info))
    return 0
