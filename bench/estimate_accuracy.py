"""Memory estimate against measurement: dpwise advise's per-device estimate for a single process
and the peak live tensor memory `dpwise compare` measures, for the three built-in workloads at two
batch sizes each, on the CPU. Target: within 25 %.

Run: .venv/bin/python bench/estimate_accuracy.py
"""

from __future__ import annotations

from pathlib import Path

from dpwise.compare.settings import CompareConfig
from dpwise.compare.worker import single_process_peak
from dpwise.estimate import Settings, estimate_all, model_facts
from dpwise.workload import resolve_workload

WORKLOADS = [("simple", {}), ("cnn", {"samples": 1024}), ("transformer", {"samples": 1024})]
BATCHES = (64, 256)


def measured(model: str, data_args: dict, batch: int) -> int:
    cfg = CompareConfig(model=model, data_args=data_args, batch_size=batch, out=Path("unused"))
    return single_process_peak(cfg, profile_steps=4)


def main() -> None:
    cfg = {"precision": "fp32", "optimizer": "sgd", "momentum": 0.0, "seed": 0}
    print(f"{'workload':<13}{'batch':>6}{'estimate MiB':>14}{'measured MiB':>14}{'error':>8}")
    for model, data_args in WORKLOADS:
        facts = model_facts(resolve_workload(model, {}, None, data_args), cfg)
        for batch in BATCHES:
            est = estimate_all(facts, 2, Settings(batch, "fp32", "sgd", 0.0))["single"]
            meas = measured(model, data_args, batch)
            err = (est["peak_bytes"] - meas) / meas
            print(
                f"{model:<13}{batch:>6}{est['peak_bytes'] / 2**20:>14.2f}"
                f"{meas / 2**20:>14.2f}{err:>+8.1%}"
            )


if __name__ == "__main__":
    main()
