"""Memory estimate against measurement: dpwise advise's per-device estimate for a single process
and the peak live tensor memory `dpwise compare` measures (CPU, SGD, fp32), for the built-in
workloads, two models the meta-device trace cannot run (BatchNorm on one value per channel, a
forward calling .item()), and real architectures from torchvision, timm and transformers when they
import (skipped with the reason otherwise; CI's torch does not import torchvision). Target:
within 25 %. The last columns put the same model through the path a model over 1 GiB of
parameters takes (traced on the meta device, or the fallback when that cannot run).

Run: .venv/bin/python bench/estimate_accuracy.py [NAME ...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests" / "fixtures"), str(HERE.parent / "tests")]

from dpwise.advise import footprint  # noqa: E402
from dpwise.advise.estimate import Settings, estimate_all, model_facts  # noqa: E402
from dpwise.compare.settings import CompareConfig  # noqa: E402
from dpwise.workload import resolve_workload  # noqa: E402
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


def run(name: str) -> None:
    model, model_args, data, data_args, batches = CASES[name]
    try:
        workload = resolve_workload(model, model_args, data, data_args)
        start = time.perf_counter()
        facts = model_facts(workload, SGD)
        seconds = time.perf_counter() - start
    except Exception as exc:  # an optional library that does not import here
        print(f"{name:<20} skipped: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
        return
    traced = traced_facts(workload)
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


def main() -> None:
    names = sys.argv[1:] or list(CASES)
    print(
        f"{'workload':<20}{'batch':>6}{'measured':>10}{'estimate':>10}{'error':>8}  how"
        f"{'':<20}{'if >1 GiB':>10}{'error':>8}  how  (MiB)"
    )
    for name in names:
        run(name)


if __name__ == "__main__":
    main()
