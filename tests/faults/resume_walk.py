"""Under torchrun (two workers, one process group for every case): each case of a JSON list is
trained uninterrupted, then cut at a step and resumed from its checkpoint, with dpwise's own
strategies and loop; rank 0 writes each case's largest parameter difference between the two
final models (or the error that stopped it) to a JSON file.

    python -m torch.distributed.run --standalone --nproc-per-node 2 resume_walk.py CASES OUT

(the test forks the two workers (``worker``) from dpwise's fork server, as dpwise starts its
own, with torchrun's variables set, without its agent)

A case: {"name": ..., "settings": TrainConfig keyword arguments, "cut": steps before the cut,
"resume_with": settings changed for the resumed part (a knob changed between runs)}.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from dpwise.infra.hardware import Hardware
from dpwise.launch.env import DistEnv
from dpwise.strategies import make_strategy
from dpwise.train.config import TrainConfig
from dpwise.train.engine import train
from dpwise.train.plan import resolve
from dpwise.train.restart import first_attempt
from dpwise.workload.spec import workload_for

HARDWARE = Hardware(cuda_devices=0, cpu_cores=2)


def _train(settings: dict[str, Any], env: DistEnv) -> dict[str, torch.Tensor]:
    cfg = TrainConfig(quiet=True, **settings)
    plan = resolve(cfg, HARDWARE, env)
    strategy = make_strategy(plan.strategy, env)
    trained = train(plan, strategy, workload_for(cfg), attempt=first_attempt(cfg))
    return {k: v.detach().clone() for k, v in trained.state.items()}


def _case(
    case: dict[str, Any], folder: Path, env: DistEnv, wholes: dict[str, dict[str, torch.Tensor]]
) -> float:
    settings = case["settings"]
    later = {**settings, **case.get("resume_with", {})}
    # cases whose uninterrupted runs have the same settings (only the cut, or the knob changed
    # on resume, differs) compare with one such run: the same seed trains the same model
    key = json.dumps(later, sort_keys=True)
    if key not in wholes:
        wholes[key] = _train(later, env)
    whole = wholes[key]
    out = folder / case["name"]
    cut = case["cut"]
    _train({**settings, "max_steps": cut, "checkpoint_every": cut, "out": out}, env)
    resumed = _train({**later, "out": out, "resume": out / "checkpoint.pt"}, env)
    if env.rank != 0:  # a sharded strategy's state is whole on rank 0 only
        return 0.0
    return max((whole[k].float() - resumed[k].float()).abs().max().item() for k in whole)


def main(cases_path: str, out_path: str) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", timeout=timedelta(seconds=60))
    env = DistEnv.from_environ()
    folder = Path(out_path).parent / "runs"
    results: dict[str, Any] = {}
    wholes: dict[str, dict[str, torch.Tensor]] = {}
    for case in json.loads(Path(cases_path).read_text()):
        try:
            results[case["name"]] = _case(case, folder, env, wholes)
        except Exception as exc:  # the case fails, the walk goes on (every rank fails alike)
            last = traceback.format_exception_only(exc)[-1].strip()
            results[case["name"]] = f"error: {last}"
        dist.barrier()
    if env.rank == 0:
        Path(out_path).write_text(json.dumps(results))
    dist.destroy_process_group()


def worker(cases_path: str, out_path: str, log_path: str) -> None:
    """One worker of the walk, forked from dpwise's fork server with torchrun's variables set:
    nothing on stdout, its stderr (a traceback) in ``log_path``."""
    with open(log_path, "w") as log, open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
        os.dup2(log.fileno(), 2)
    main(cases_path, out_path)


if __name__ == "__main__":
    main(*sys.argv[1:])
