"""The `dpwise` command line: parse, call the library, render. No training logic here."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dpwise import __version__
from dpwise.config import BACKENDS, DEVICES, OPTIMIZERS, PRECISIONS, RDZV_BACKENDS, STRATEGIES
from dpwise.errors import DpwiseError

TRAIN_EPILOG = """\
examples:
  dpwise train                                    # the guide's SimpleModel, one process
  dpwise train --strategy ddp --nproc 2 --out runs/ddp
  dpwise train --model transformer --model-arg layers=4 --model-arg dim=256
  dpwise train --model mypkg.models:build --data mypkg.data:load --strategy ddp
  torchrun --standalone --nproc_per_node=2 -m dpwise train --strategy ddp --out runs/ddp

--batch-size is the GLOBAL batch: ddp with W workers gives each worker batch/W rows, so
single, dp and ddp train on the same rows in the same order and end with the same parameters.
"""


COMPARE_EPILOG = """\
examples:
  dpwise compare                                  # the guide's SimpleModel, world sizes 1 and 2
  dpwise compare --model cnn --out runs/cnn       # BatchNorm: convergence fails and says why
  dpwise compare --model mypkg.models:build --data mypkg.data:load --world-sizes 1,2,4

Each run trains --epochs epochs --repeats times from the same initial state; the first epoch of
each repeat is an untimed warm-up. Exit code: 0 when no check fails, 1 when one fails, 2 on bad
input. The report (report.html, report.md, results.json, plots, traces) goes to --out.
"""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is a DpwiseError: one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise DpwiseError(f"{message} (see '{self.prog} --help')")


def _add_workload_args(p: argparse.ArgumentParser) -> None:
    w = p.add_argument_group("workload")
    w.add_argument("--model", default="simple", help="simple | cnn | transformer | pkg.mod:factory")
    w.add_argument("--model-arg", action="append", metavar="KEY=VALUE", help="factory argument")
    w.add_argument("--data", default=None, help="pkg.mod:factory returning a Dataset or (x, y)")
    w.add_argument("--data-arg", action="append", metavar="KEY=VALUE", help="e.g. samples=20000")


def _add_train_args(p: argparse.ArgumentParser) -> None:
    _add_workload_args(p)
    s = p.add_argument_group("strategy and launch")
    s.add_argument("--strategy", default="single", choices=STRATEGIES)
    s.add_argument("--nproc", type=int, help="ddp workers per node (default: GPUs, else 2)")
    s.add_argument("--device", default="auto", choices=DEVICES, help="auto: CUDA when present")
    s.add_argument("--backend", default="auto", choices=BACKENDS, help="auto: nccl on CUDA")
    s.add_argument("--nnodes", type=int, default=1, help="nodes (multi-node needs rendezvous)")
    s.add_argument("--node-rank", type=int, default=0, help="this node's rank (static rdzv)")
    s.add_argument("--rdzv-endpoint", help="HOST:PORT of the c10d rendezvous (multi-node)")
    s.add_argument("--rdzv-backend", default="c10d", choices=RDZV_BACKENDS)
    s.add_argument("--rdzv-id", default="dpwise", help="job id shared by every node of one job")
    s.add_argument("--max-restarts", type=int, default=0, help="restarts of failed workers")
    s.add_argument("--threads", type=int, help="CPU threads per process (default: cores/nproc)")
    h = p.add_argument_group("training")
    h.add_argument("--epochs", type=int, default=2)
    h.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    h.add_argument("--batch-size", type=int, default=256, help="GLOBAL batch per micro-step")
    h.add_argument("--accum-steps", type=int, default=1, help="micro-steps per optimizer step")
    h.add_argument("--lr", type=float, default=0.01)
    h.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    h.add_argument("--momentum", type=float, default=0.0, help="SGD momentum")
    h.add_argument("--weight-decay", type=float, default=0.0)
    h.add_argument("--precision", default="fp32", choices=PRECISIONS, help="autocast dtype")
    h.add_argument("--seed", type=int, default=0, help="data, initial weights and order")
    o = p.add_argument_group("outputs")
    o.add_argument("--out", type=Path, help="folder for final.pt and metrics.json")
    o.add_argument("--checkpoint-every", type=int, metavar="N", help="checkpoint every N steps")
    o.add_argument(
        "--resume",
        nargs="?",
        const="auto",
        metavar="PATH",
        help="continue from a checkpoint (default: OUT/checkpoint.pt)",
    )
    o.add_argument("--quiet", action="store_true", help="print nothing but errors")


def _add_compare_args(p: argparse.ArgumentParser) -> None:
    _add_workload_args(p)
    r = p.add_argument_group("runs")
    r.add_argument("--strategies", default="single,dp,ddp", help="comma-separated (default: all)")
    r.add_argument("--world-sizes", help="e.g. 1,2,4 (default: 1,2 on CPU; 1,2,4… GPUs on GPU)")
    r.add_argument("--device", default="auto", choices=DEVICES)
    r.add_argument("--epochs", type=int, default=5, help="epochs per repeat (first is warm-up)")
    r.add_argument("--repeats", type=int, default=12, help="timed repeats per run")
    r.add_argument("--batch-size", type=int, default=256, help="GLOBAL batch")
    r.add_argument("--precision", default="fp32", choices=PRECISIONS)
    r.add_argument("--optimizer", default="sgd", choices=OPTIMIZERS)
    r.add_argument("--lr", type=float, default=0.01)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--tolerance", type=float, default=1e-4, help="convergence threshold")
    r.add_argument("--profile-steps", type=int, default=4, help="steps under torch.profiler")
    o = p.add_argument_group("outputs")
    o.add_argument("--out", type=Path, default=Path("runs/compare"), help="report folder")
    o.add_argument("--quiet", action="store_true", help="no progress display")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="dpwise",
        description="Choose, run and verify a PyTorch data-parallel strategy, with measurements.",
    )
    parser.add_argument("--version", action="version", version=f"dpwise {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    train = sub.add_parser(
        "train",
        help="train one workload with one strategy (single, dp, ddp)",
        description="Train one workload with one data-parallel strategy, launched correctly.",
        epilog=TRAIN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_train_args(train)
    train.set_defaults(func=cmd_train)
    compare = sub.add_parser(
        "compare",
        help="run single, dp and ddp side by side and check the guide's claims",
        description=(
            "Train the same workload under single, dp and ddp at several world sizes, run the "
            "five validation checks (convergence, memory, speed, communication, scalability) "
            "and write a report with a recommendation."
        ),
        epilog=COMPARE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_compare_args(compare)
    compare.set_defaults(func=cmd_compare)
    return parser


def train_config(args: argparse.Namespace):
    from dpwise.config import TrainConfig, parse_kv

    resume = args.resume
    if resume == "auto":
        resume = None if args.out is None else args.out / "checkpoint.pt"
        if args.out is None:
            raise DpwiseError(
                "--resume without a PATH needs --out DIR (it reads DIR/checkpoint.pt)"
            )
    return TrainConfig(
        model=args.model,
        model_args=parse_kv(args.model_arg, "--model-arg"),
        data=args.data,
        data_args=parse_kv(args.data_arg, "--data-arg"),
        strategy=args.strategy,
        nproc=args.nproc,
        nnodes=args.nnodes,
        node_rank=args.node_rank,
        rdzv_endpoint=args.rdzv_endpoint,
        rdzv_backend=args.rdzv_backend,
        rdzv_id=args.rdzv_id,
        max_restarts=args.max_restarts,
        device=args.device,
        backend=args.backend,
        epochs=args.epochs,
        max_steps=args.max_steps,
        batch_size=args.batch_size,
        accum_steps=args.accum_steps,
        lr=args.lr,
        optimizer=args.optimizer,
        momentum=args.momentum,
        weight_decay=args.weight_decay,
        precision=args.precision,
        seed=args.seed,
        threads=args.threads,
        out=args.out,
        checkpoint_every=args.checkpoint_every,
        resume=None if resume is None else Path(resume),
        quiet=args.quiet,
    )


def cmd_train(args: argparse.Namespace) -> int:
    from dpwise import checkpoint, outputs
    from dpwise.env import DistEnv
    from dpwise.launch import launch
    from dpwise.plan import Hardware, resolve
    from dpwise.runner import run_worker, worker_entry
    from dpwise.workload import resolve_workload

    cfg = train_config(args)
    plan = resolve(cfg, Hardware.detect(), DistEnv.from_environ())
    resolve_workload(cfg.model, cfg.model_args, cfg.data, cfg.data_args)  # imports fail here
    if cfg.out is not None:
        outputs.check_writable(cfg.out)
    if cfg.resume is not None:
        checkpoint.load(cfg.resume, checkpoint.fingerprint(cfg.to_dict()))
    if plan.launch:
        launch(plan, worker_entry, cfg)
    else:
        run_worker(cfg)
    return 0


def compare_config(args: argparse.Namespace):
    from dpwise.compare.settings import CompareConfig, parse_list
    from dpwise.config import parse_kv

    return CompareConfig(
        model=args.model,
        model_args=parse_kv(args.model_arg, "--model-arg"),
        data=args.data,
        data_args=parse_kv(args.data_arg, "--data-arg"),
        strategies=parse_list(args.strategies, "--strategies"),
        world_sizes=None
        if args.world_sizes is None
        else parse_list(args.world_sizes, "--world-sizes", int),
        device=args.device,
        epochs=args.epochs,
        repeats=args.repeats,
        batch_size=args.batch_size,
        precision=args.precision,
        optimizer=args.optimizer,
        lr=args.lr,
        seed=args.seed,
        tolerance=args.tolerance,
        profile_steps=args.profile_steps,
        out=args.out,
        quiet=args.quiet,
    )


def cmd_compare(args: argparse.Namespace) -> int:
    from dpwise.compare.session import run_compare

    return run_compare(compare_config(args), " ".join(["dpwise", *sys.argv[1:]]))


def main(argv: list[str] | None = None) -> int:
    from dpwise.launch import WorkerFailed

    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except DpwiseError as exc:
        print(f"dpwise: error: {exc}", file=sys.stderr)
        return 2
    except WorkerFailed as exc:
        if exc.details:
            print(exc.details.rstrip(), file=sys.stderr)
        print(f"dpwise: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dpwise: interrupted", file=sys.stderr)
        return 130
