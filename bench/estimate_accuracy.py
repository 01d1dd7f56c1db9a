"""Memory estimate against measurement: dpwise advise's per-device estimate and the peak live
tensor memory `dpwise compare` measures (CPU, SGD, fp32), for the built-in workloads, two models
the meta-device trace cannot run (BatchNorm on one value per channel, a forward calling .item()),
and real architectures from torchvision, timm and transformers when they import (skipped with the
reason otherwise; CI's torch does not import torchvision). Target: within 25 %.

The first table is the single process; its last columns put the same model through the path a
model over 1 GiB of parameters takes (traced on the meta device, or the fallback when that cannot
run). The second table is every strategy with a process per device (ddp, fsdp) at world size 2:
`dpwise compare --strategies single,ddp,fsdp --world-sizes 2` runs them (gloo), each process's
peak is printed, and the estimate is set against the busiest process, as advise estimates it.
gloo has no reduce-scatter of its own: FSDP2's reduce-scatter there all-reduces a copy of the
unit's gradient, and in some runs one process still holds the step's last copy at the next step,
so that fsdp's processes differ by a unit (the SimpleModel's first layer, 2.0 MiB).

Run: .venv/bin/python bench/estimate_accuracy.py [--single-only] [NAME ...]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "fixtures"), str(HERE.parent / "tests")]

from dpwise.advise import footprint  # noqa: E402
from dpwise.advise.estimate import Settings, estimate_all, model_facts  # noqa: E402
from dpwise.compare.settings import CompareConfig  # noqa: E402
from dpwise.strategies import reference, those  # noqa: E402
from dpwise.workload.spec import resolve_workload  # noqa: E402
from probe_peak import single_process_peak  # noqa: E402

SYNTH = "synthetic"
# name: (model, model_args, data, data_args, batches); library models use dpwise's shortcuts and
# synthetic data inferred from the model (fresh weights, nothing downloaded)
CASES = {
    "simple": ("simple", {}, None, {}, (64, 256)),
    "cnn": ("cnn", {}, None, {"samples": 1024}, (64, 256)),
    "transformer": ("transformer", {}, None, {"samples": 1024}, (64, 256)),
    "batchnorm-net": ("estimate_models:batchnorm_net", {}, "estimate_models:images", {}, (64, 256)),
    "wide-embedding": (
        "estimate_models:wide_embedding",
        {},
        "estimate_models:tokens",
        {},
        (8, 512),
    ),
    "reads-values": ("estimate_models:reads_values", {}, "estimate_models:vectors", {}, (64, 256)),
    "resnet18 (32 px)": (
        "torchvision:resnet18",
        {"num_classes": 10},
        SYNTH,
        {"shape": "3x32x32", "classes": 10, "samples": 512},
        (64, 256),
    ),
    "mobilenet_v3_small": (
        "torchvision:mobilenet_v3_small",
        {"num_classes": 10},
        SYNTH,
        {"shape": "3x64x64", "classes": 10, "samples": 512},
        (64, 256),
    ),
    "vit_tiny (64 px)": (
        "timm:vit_tiny_patch16_224",
        {"num_classes": 10, "img_size": 64},
        SYNTH,
        {"shape": "3x64x64", "classes": 10, "samples": 512},
        (32, 128),
    ),
    "gpt2 (2 layers)": (
        "transformers:gpt2",
        {"n_layer": 2},
        SYNTH,
        {"seq_len": 32, "samples": 256},
        (8, 24),
    ),
    "bert (2 layers)": (
        "transformers:BertForSequenceClassification",
        {"num_hidden_layers": 2, "num_labels": 10},
        SYNTH,
        {"seq_len": 32, "classes": 10, "samples": 256},
        (16, 64),
    ),
}
SGD = {"precision": "fp32", "optimizer": "sgd", "momentum": 0.0, "seed": 0}
WORLD = 2
# every strategy with a process per device: its processes are measured side by side by compare
PER_PROCESS = those(lambda t: t.multiprocess)


def measured(model, model_args, data, data_args, batch: int) -> int:
    cfg = CompareConfig(
        model=model,
        model_args=model_args,
        data=data,
        data_args=data_args,
        batch_size=batch,
        out=Path("unused"),
    )
    return single_process_peak(cfg, profile_steps=4)


def traced_facts(workload):
    """The same model through the path a model over 1 GiB takes (the meta-device trace)."""
    limit = footprint.REAL_RUN_LIMIT
    footprint.REAL_RUN_LIMIT = 0
    try:
        return model_facts(workload, SGD)
    finally:
        footprint.REAL_RUN_LIMIT = limit


def _flags(flag: str, args: dict) -> list[str]:
    return [a for k, v in args.items() for a in (flag, f"{k}={v}")]


def compared(model, model_args, data, data_args, batch: int) -> dict[str, list[int]]:
    """Each process's peak live tensor bytes per strategy (``PER_PROCESS``) at world size 2, as
    `dpwise compare` measures them (two profiled steps after two warm-up steps)."""
    paths = [str(HERE.parent / "src"), *sys.path[:2], os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p)}
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "dpwise", "compare", "--model", model,
            *_flags("--model-arg", model_args), *(["--data", data] if data else []),
            *_flags("--data-arg", data_args), "--batch-size", str(batch),
            "--strategies", ",".join((reference(), *PER_PROCESS)), "--world-sizes", str(WORLD),
            "--device", "cpu", "--epochs", "2", "--repeats", "1", "--max-steps", "2",
            "--profile-steps", "2", "--quiet", "--out", tmp,
        ]  # fmt: skip
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        results = Path(tmp) / "results.json"
        if not results.exists():  # exit 1 with results: a check failed (BatchNorm, dropout)
            output = (done.stderr + done.stdout).strip().splitlines() or ["no output"]
            raise RuntimeError(f"exit {done.returncode}: {output[-1]}")
        runs = json.loads(results.read_text())["runs"]
    return {
        r["strategy"]: [d["peak_bytes"] for d in r["memory"]["per_device"]]
        for r in runs
        if r["strategy"] in PER_PROCESS
    }


def per_process(name: str, facts, batch: int, case: tuple) -> list[str]:
    """One line per multi-process strategy: each rank's measured peak, the estimate, the error."""
    model, model_args, data, data_args, _ = case
    try:
        peaks = compared(model, model_args, data, data_args, batch)
    except Exception as exc:  # a strategy that cannot run this workload here
        return [f"{name:<20}{batch:>6}  skipped: {type(exc).__name__}: {str(exc)[:100]}"]
    # measured on the CPU: gloo's reduce-scatter, as the runs have it
    estimate = estimate_all(facts, WORLD, Settings(batch, "fp32", "sgd", 0.0, backend="gloo"))
    lines = []
    for strategy, ranks in peaks.items():
        est, busiest = estimate[strategy]["peak_bytes"], max(ranks)
        each = ", ".join(f"{r / 2**20:.1f}" for r in ranks)
        lines.append(
            f"{name:<20}{batch:>6}  {strategy:<6}{each:>16}{busiest / 2**20:>10.1f}"
            f"{est / 2**20:>10.1f}{(est - busiest) / busiest:>+8.1%}"
        )
    return lines


def run(name: str, single_only: bool) -> list[str]:
    """Prints the single-process rows; returns the per-process rows (printed after them)."""
    model, model_args, data, data_args, batches = CASES[name]
    try:
        workload = resolve_workload(model, model_args, data, data_args)
        start = time.perf_counter()
        facts = model_facts(workload, SGD)
        seconds = time.perf_counter() - start
    except Exception as exc:  # an optional library that does not import here
        print(f"{name:<20} skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
        return []
    traced = traced_facts(workload)
    rows = []
    for batch in batches:
        settings = Settings(batch, "fp32", "sgd", 0.0)
        est, alt = (estimate_all(f, 2, settings)["single"]["peak_bytes"] for f in (facts, traced))
        meas = measured(model, model_args, data, data_args, batch)
        print(
            f"{name:<20}{batch:>6}{meas / 2**20:>10.1f}{est / 2**20:>10.1f}"
            f"{(est - meas) / meas:>+8.1%}  {facts.method} ({seconds:.0f} s)"
            f"{alt / 2**20:>10.1f}{(alt - meas) / meas:>+8.1%}  {traced.method}",
            flush=True,
        )
        if not single_only:
            rows += per_process(name, facts, batch, CASES[name])
    return rows


def main() -> None:
    args = sys.argv[1:]
    single_only = "--single-only" in args
    names = [a for a in args if a != "--single-only"] or list(CASES)
    print(
        f"{'workload':<20}{'batch':>6}{'measured':>10}{'estimate':>10}{'error':>8}  how"
        f"{'':<20}{'if >1 GiB':>10}{'error':>8}  how  (MiB)"
    )
    rows = [row for name in names for row in run(name, single_only)]
    if single_only:
        return
    print(f"\nA process per device, world size {WORLD} (MiB; error against the busiest process)")
    print(
        f"{'workload':<20}{'batch':>6}  {'':<6}{'each process':>16}{'busiest':>10}"
        f"{'estimate':>10}{'error':>8}"
    )
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
