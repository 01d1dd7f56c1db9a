"""Arguments shared by several commands."""

from __future__ import annotations

import argparse

from dpwise.config import DEFAULT_TIMEOUT_S, LOSSES

MODEL_HELP = (
    "simple | cnn | transformer | torchvision:NAME | timm:NAME | transformers:TYPE-or-Class | "
    "pkg.mod:factory (library models start from fresh weights; nothing is downloaded)"
)
DATA_HELP = (
    "pkg.mod:factory returning (inputs, targets), a dict of tensors or a Dataset; or 'synthetic' "
    "(--data-arg shape=3x224x224 classes=10 | vocab=V seq_len=T | outputs=K, samples=N). "
    "Default: the built-in model's data, else synthetic data inferred from the model"
)
LOSS_HELP = (
    "auto (default): the model's own loss when it returns one, cross-entropy for class labels, "
    "token-cross-entropy for (batch, tokens) labels, mse for real-valued targets"
)


def add_workload_args(p: argparse.ArgumentParser) -> None:
    w = p.add_argument_group("workload")
    w.add_argument("--model", default="simple", help=MODEL_HELP)
    w.add_argument("--model-arg", action="append", metavar="KEY=VALUE", help="factory argument")
    w.add_argument("--data", default=None, help=DATA_HELP)
    w.add_argument("--data-arg", action="append", metavar="KEY=VALUE", help="e.g. samples=20000")
    w.add_argument("--loss", default="auto", choices=LOSSES, help=LOSS_HELP)


TIMEOUT_HELP = (
    "ddp: seconds a collective waits for a peer before the run fails (default "
    f"{DEFAULT_TIMEOUT_S:.0f}: room for rank 0 to write a multi-GB checkpoint while the others "
    "wait); a worker that stays stopped this long is killed and named"
)


def add_timeout_arg(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--timeout", type=float, default=DEFAULT_TIMEOUT_S, metavar="SECONDS", help=TIMEOUT_HELP
    )
