"""`dpwise advise`: the guide's decision matrix, made exact, with a per-device memory estimate."""

from __future__ import annotations

import argparse
import json
import re
from decimal import Decimal, InvalidOperation
from pathlib import Path

from dpwise.commands.common import add_workload_args
from dpwise.config import OPTIMIZERS, PRECISIONS

HELP = "recommend a strategy for a scenario, with reasons and a memory estimate"
DESCRIPTION = (
    "Recommend single, dp, ddp or fsdp for your GPUs, nodes and model, with the rule that "
    "fired, the numbers it used, the runner-up, a per-device memory estimate and the launch "
    "command. What you do not give is detected (GPUs, memory, peer access, NCCL) or assumed, "
    "and the answer says which."
)
EPILOG = """\
examples:
  dpwise advise                                           # this machine, the guide's model
  dpwise advise --gpus 8 --model transformer --model-arg layers=32 --model-arg dim=4096 \\
                --model-arg heads=32 --model-arg vocab=32000 --precision bf16
  dpwise advise --gpus 16 --nodes 2 --params 7B --device-memory 80
  dpwise advise --from runs/compare/results.json          # measurements take precedence
"""


SIZE_SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
SIZE_EXAMPLES = "7e9, 7B, 350M, 1.3b, 1.5T or 7_000_000_000"
MAX_PARAMS = 10**18  # a million times the largest models trained; floats overflow far above
_SIZE = re.compile(r"([0-9][0-9_]*(?:\.[0-9_]*)?(?:e[+-]?[0-9]+)?)([kmbgt]?)", re.IGNORECASE)


def model_size(text: str) -> int:
    """A parameter count as people write it: 7e9, 7B, 350M, 1.3b, 1.5T, 7_000_000_000."""
    match = _SIZE.fullmatch(text.strip())
    try:
        value = Decimal(match[1].replace("_", "")) if match else None
    except InvalidOperation:
        value = None
    if value is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a parameter count; write it like {SIZE_EXAMPLES}"
        )
    count = int((value * SIZE_SUFFIXES[match[2].upper()]).to_integral_value())
    if count > MAX_PARAMS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is more than {MAX_PARAMS:.0e} parameters, beyond what the estimate can "
            f"count; write the model's size like {SIZE_EXAMPLES}"
        )
    return count


def add_arguments(p: argparse.ArgumentParser) -> None:
    s = p.add_argument_group("scenario (detected or assumed when not given)")
    s.add_argument("--gpus", type=int, help="GPUs per node (default: detected)")
    s.add_argument("--nodes", type=int, help="nodes (default: 1)")
    s.add_argument("--device-memory", type=float, metavar="GiB", help="memory of one GPU")
    s.add_argument("--goal", choices=("prototype", "production"), help="default: production")
    add_workload_args(p)
    p.set_defaults(model=None)
    w = p.add_argument_group("model size and training")
    w.add_argument(
        "--params",
        type=model_size,
        metavar="N",
        help=f"parameter count instead of --model: {SIZE_EXAMPLES}",
    )
    w.add_argument("--batch-size", type=int, help="GLOBAL batch (default: 256)")
    w.add_argument("--precision", choices=PRECISIONS, help="default: fp32")
    w.add_argument("--optimizer", choices=OPTIMIZERS, help="default: adamw")
    w.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    o = p.add_argument_group("measurements and output")
    o.add_argument(
        "--from",
        dest="from_results",
        type=Path,
        metavar="RESULTS_JSON",
        help="results.json of dpwise compare: measured numbers take precedence",
    )
    o.add_argument("--json", action="store_true", help="machine-readable answer")


def run(args: argparse.Namespace) -> int:
    from dpwise.advise.answer import AdviseRequest, advise
    from dpwise.config import parse_kv
    from dpwise.report.advise_text import render

    model = args.model
    if model is None and args.params is None and args.from_results is None:
        model = "simple"  # the guide's model
    answer = advise(
        AdviseRequest(
            gpus=args.gpus,
            nodes=args.nodes,
            model=model,
            model_args=parse_kv(args.model_arg, "--model-arg"),
            data=args.data,
            data_args=parse_kv(args.data_arg, "--data-arg"),
            loss=args.loss,
            params=args.params,
            batch_size=args.batch_size,
            precision=args.precision,
            optimizer=args.optimizer,
            momentum=args.momentum,
            goal=args.goal,
            device_memory=args.device_memory,
            from_results=args.from_results,
        )
    )
    print(json.dumps(answer, indent=2) if args.json else render(answer))
    return 0
