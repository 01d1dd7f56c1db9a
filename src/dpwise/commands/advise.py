"""`dpwise advise`: the guide's decision matrix, made exact, with a per-device memory estimate."""

from __future__ import annotations

import argparse
import json

from dpwise.advise import jobscript
from dpwise.advise.request import AdviseRequest, model_size  # noqa: F401 (model_size: public)
from dpwise.commands.common import add_workload_args
from dpwise.infra.settings import add_settings, from_args

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
  dpwise advise --gpus 8 --nodes 4 --model transformer --scheduler slurm   # writes job.sbatch
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of AdviseRequest's settings (defaults and help live on its fields), in groups."""
    s = p.add_argument_group("scenario (detected or assumed when not given)")
    add_settings(s, AdviseRequest, ("gpus", "nodes", "device_memory", "goal"))
    add_workload_args(p, AdviseRequest)
    w = p.add_argument_group("model size and training")
    add_settings(w, AdviseRequest, ("params", "batch_size", "precision", "optimizer", "momentum"))
    o = p.add_argument_group("measurements and output")
    add_settings(o, AdviseRequest, ("from_results", "link", "devices", "json"))
    m = p.add_argument_group("memory at scale, simulated")
    add_settings(m, AdviseRequest, ("simulate", "simulate_timeout"))
    j = p.add_argument_group("the job to submit")
    add_settings(j, AdviseRequest, ("scheduler", "job_out"))


def run(args: argparse.Namespace) -> int:
    from dpwise.advise.answer import advise
    from dpwise.advise.text import render

    model = args.model
    if model is None and args.params is None and args.from_results is None:
        model = "simple"  # the guide's model
    request = from_args(AdviseRequest, args, model=model)
    target = None
    if request.scheduler is not None:
        target = request.job_out or jobscript.default_path(request.scheduler)
        jobscript.check_target(target)  # before advising: nothing half-done
    answer = advise(request)
    if target is not None:
        spec = jobscript.from_answer(answer, request.scheduler)
        jobscript.write(spec, target)
        answer["job"] = jobscript.summary(spec, target)
    print(json.dumps(answer, indent=2) if request.json else render(answer))
    return 0
